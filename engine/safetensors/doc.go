// Package safetensors reads and writes the safetensors format used by both
// checkpoint layouts the engine loads.
//
// A file is an 8-byte little-endian header length N, N bytes of JSON that map
// tensor names to {dtype, shape, data_offsets}, then the data section. The
// reader maps the whole file read-only (mmap) and hands out tensors as byte
// slices into the mapping, so a 20 GB checkpoint costs page cache, not Go
// heap. Every offset, shape and size in the header is checked before any
// slice is made: a truncated or corrupt file is an error, never a panic.
//
// Set opens a model folder's weights, single-file (model.safetensors) or
// sharded (model.safetensors.index.json plus the shards it names), as one
// name → tensor map.
//
// Writer streams a file to disk tensor by tensor (the header is written
// first, from the declared specs) into a temporary file that is renamed into
// place only when every byte has been written, so a crash or an error never
// leaves a half-written file under the final name.
package safetensors
