// Package tools is the tools role: its activity tools.Run runs one call of a tool (the built-ins of
// algorithms/tools, python in the code sandbox) on a `tools` worker, heartbeating while it runs, so
// that a long-running or crashing tool is retried on another worker and shows in the Web UI as its
// own activity under its own ToolCall workflow.
//
// Contract:
//   - A call's failure (bad arguments, a program that exits non-zero or times out) is a result with
//     Error and Kind, never a failed activity; the activity fails only when it is cancelled or its
//     worker dies, and is then retried by the ToolCall workflow.
//   - Remote turns a Dispatcher (the workers' ToolCall client) into tools.Env.Remote for the roles
//     that play episodes (rollout, the trainer's evaluations): each long-running call runs under a
//     workflow ID its caller derives from the call's place (run, phase, iteration, episode, turn)
//     and arguments, so a retried rollout that replays its episodes gets the finished calls back
//     instead of running them again.
//   - Only go.temporal.io/sdk/activity and sdk/temporal are used from Temporal.
package tools
