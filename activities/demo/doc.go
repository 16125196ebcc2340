// Package demo holds the placeholder work of the foundation: an activity that "trains" for N steps by
// sleeping, heartbeating its progress, and resuming from its last heartbeat when retried on another
// worker. It exercises exactly the durability paths real training activities use (heartbeats, retries,
// resume from progress) without any math, so the orchestration can be tested on its own.
package demo
