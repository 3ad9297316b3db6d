// Package hub gets a model onto this machine and finds the ones already on
// it: the Hugging Face hub client, the Hugging Face cache, discovery of model
// folders, the machine check, and the "model" setting.
//
// The pieces, in the order the first run uses them:
//
//   - Config (ConfigFromEnv) reads the same environment as huggingface_hub:
//     HF_ENDPOINT, HF_TOKEN (or the token file that `hf auth login` writes),
//     HF_HOME, HF_HUB_CACHE and HF_HUB_OFFLINE.
//   - Client.Plan lists a repository through the hub API (file sizes, git
//     blob ids and LFS SHA-256), works out what is already cached and what
//     remains to download, and runs the machine check (CheckMachine): Apple
//     silicon, macOS 14 or later, memory, the GPU's working set and free
//     disk, each result a sentence for someone who is not a developer.
//   - Client.Pull downloads a revision into the cache: config.json first, so
//     that a repository of another architecture is refused before any weight
//     is fetched; then the other files in parallel, each into
//     blobs/<id>.incomplete with HTTP Range resume (across restarts too),
//     verified against its SHA-256 (LFS files) or git blob id (small files)
//     before it is renamed into place and linked from snapshots/<commit>.
//     Network errors, 429 and 5xx are retried with backoff; 401, 403, 404,
//     a full disk and a failed checksum become errors that say what to do.
//     Progress goes to a callback. Offline (HF_HUB_OFFLINE, or the hub out
//     of reach) a complete cached snapshot is used instead: at once when
//     the connection is refused or the hub's name does not resolve, after
//     the retries when the hub answers with errors or stalls.
//   - What the cache and the hub hand over is not trusted further than it
//     must be: a partial file is never written through a link, a revision
//     must be a commit id or a git ref name before it becomes a path, the
//     listing's pages are bounded and may not loop, and the token goes to
//     the endpoint's own host only.
//   - Cache is the Hugging Face cache layout (models--org--name/{blobs,
//     snapshots,refs}), so what mlx-lm or `hf download` stored is reused
//     without a request for its files, and what Pull stores is theirs too.
//   - Discover lists the model folders in the Hugging Face cache and in LM
//     Studio's folders, each validated by Validate with the engine's own
//     checkpoint and tokenizer checks.
//   - UseModel validates a folder, then writes it as the "model" key of
//     settings.json (app/settings).
//
// For the app (the welcome view, the tray), with one Client made from
// ConfigFromEnv and one Downloads around it:
//
//	plan, err := client.Plan(ctx, hub.DefaultRepo, "")  // sizes, where, plan.Machine
//	found, err := hub.Discover(hub.DefaultPlaces(cfg))   // models already here
//	job, err := downloads.Start(plan.Repo, plan.Revision)
//	reports, stop := job.Watch()                         // Progress until the end
//	job.Cancel()                                         // pause; Start resumes
//	snap, err := job.Wait()
//	f, err := hub.UseModel(settingsPath, snap.Dir)       // or a picked folder
//
// Plan, Report, Progress and Found marshal to JSON for the UI; errors are
// *Error with a kind to match (ErrAuth, ErrDiskFull, ...) and a message to
// show as it is.
package hub
