// Package modelhost owns the one model the app runs, for the window, the
// API server and `suzuran serve --no-ui` alike: it loads a model folder in
// the background with progress (on the GPU once its self-check passes,
// else on the CPU: engine/gpucheck), names it, tracks its state, hands its
// engine to requests, unloads it after the keep-alive time and loads it
// again on the next request, and says what the model can do.
//
// A model's name is the same everywhere it shows (the window, the tray,
// /v1/models, the log): the demo model is "Suzuran Tiny", a snapshot in the
// Hugging Face cache (models--org--name/snapshots/<commit>) is "org/name",
// any other folder its own name. A request that names the model by that
// name is served.
package modelhost
