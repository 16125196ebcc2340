// Temper fork: see third_party/README.md.

// Package forkpatch holds no code: its test keeps third_party/compute.patch (the fork against the
// published upstream module) current, so the pristine upstream and every fork change stay
// recoverable and reviewable. It belongs to the Temper fork, not to upstream.
package forkpatch
