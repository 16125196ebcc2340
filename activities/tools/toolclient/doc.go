// Package toolclient is the calling side of the tools role, for the roles that play episodes (rollout,
// the trainer's evaluations): Remote turns a Dispatcher (the workers' ToolCall client) into
// tools.Env.Remote, so that each call of a long-running tool (python) runs as a ToolCall workflow on
// the tools queue under a workflow ID its caller derives from the call's place (run, phase, iteration,
// episode, turn) and arguments; a retried rollout that replays its episodes gets the finished calls
// back instead of running them again.
//
// Contract: it imports neither the code sandbox nor any tool implementation (internal/arch checks that
// the trainer and rollout roles do not link activities/reward/sandbox), and no Temporal package: the
// Dispatcher is an interface that workers implements over a client.
package toolclient
