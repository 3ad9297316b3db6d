// Hugging Face's JavaScript hub client on the cache app/hub shares, for
// app/hub's compatibility tests. Arguments: a command and its JSON
// parameters; prints a JSON result.
//
//   download {"hubUrl", "repo", "revision", "cacheDir"} -> {"snapshot"}
//     snapshotDownload: what it finds in the cache it does not fetch.
//   scan {"cacheDir"} -> {"repos": [{"id", "type", "size", "files", "revisions"}]}
//     scanCacheDir: how the client reads a cache folder.
import { snapshotDownload, scanCacheDir } from "@huggingface/hub";

// The client logs each download with console.debug; stdout is the result.
console.debug = () => {};

const [command, raw] = process.argv.slice(2);
const params = JSON.parse(raw);

if (command === "download") {
  const snapshot = await snapshotDownload({
    repo: { type: "model", name: params.repo },
    revision: params.revision,
    cacheDir: params.cacheDir,
    hubUrl: params.hubUrl,
  });
  console.log(JSON.stringify({ snapshot }));
} else if (command === "scan") {
  const info = await scanCacheDir(params.cacheDir);
  const repos = info.repos.map((r) => ({
    id: r.id.name,
    type: r.id.type,
    size: r.size,
    files: r.filesCount,
    revisions: r.revisions.map((rev) => ({
      commit: rev.commitOid,
      files: rev.files.map((f) => ({ path: f.path, blob: f.blob.path, size: f.blob.size })),
      refs: rev.refs,
    })),
  }));
  console.log(JSON.stringify({ repos, warnings: info.warnings.map(String) }));
} else {
  console.error(`unknown command ${command}`);
  process.exit(2);
}
