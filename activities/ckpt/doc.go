// Package ckpt stores training checkpoints on local disk (file:///abs/dir, the
// default) or Google Cloud Storage (gs://bucket/prefix), as opaque byte
// streams: it never parses tensors.
//
// Contract:
//   - A checkpoint is the directory <root>/runs/<run>/<phase>/step-NNNNNN/ with
//     files such as model.safetensors, optimizer.safetensors, state.json and
//     MANIFEST.json (every file's size and sha256). The manifest is written
//     last; a checkpoint exists for readers only if its manifest does.
//   - Commit is atomic. Local: files go to <phase>/.tmp-<step>-<id>/, are
//     fsynced, and the directory is renamed into place. GCS: files go to
//     <step>/w-<id>/ (writer-unique, so a slow duplicate writer can never
//     overwrite committed bytes) and MANIFEST.json is created with a
//     DoesNotExist precondition; its entries name those objects.
//   - Concurrent writers of one step: exactly one commit wins; the others get
//     the winner's Ref and no error. Save returns an existing checkpoint
//     without rewriting it, so a retried activity finds its own output.
//   - Reads verify size and sha256 while streaming; a mismatch is an error
//     wrapping ErrCorrupt that names the file's URI. Latest skips corrupt
//     checkpoints (and says which and why) but returns I/O errors.
//   - Retain keeps the newest N and every best checkpoint; deletion hides a
//     checkpoint first (manifest first; locally, rename away). GC removes
//     uncommitted leftovers older than a given age.
//   - A phase directory also holds the phase's metrics log, metrics.jsonl (metricslog.go): one record
//     per step and per evaluation, replaced (never duplicated) when a retried activity writes again.
//   - Memory: a local save streams through a 32 KiB buffer. A GCS upload holds
//     about Parallelism*PartSize bytes (default 4*16 MiB) whatever the file
//     size: parts upload concurrently and are composed server-side. Every GCS
//     call is retried (storage.RetryAlways) because each is safe to repeat.
package ckpt
