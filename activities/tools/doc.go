// Package tools is the tools role: its activity tools.Run runs one call of a tool (the built-ins of
// algorithms/tools, python in the code sandbox) on a `tools` worker, heartbeating while it runs, so
// that a long-running or crashing tool is retried on another worker and shows in the Web UI as its
// own activity under its own ToolCall workflow.
//
// Contract:
//   - A call's failure (bad arguments, a program that exits non-zero or times out) is a result with
//     Error and Kind, never a failed activity; the activity fails only when it is cancelled or its
//     worker dies, and is then retried by the ToolCall workflow.
//   - The calling side (Remote, CallID, the Dispatcher the workers implement) is in toolclient, so the
//     roles that call tools do not link the code sandbox this package runs python in.
//   - Only go.temporal.io/sdk/activity and sdk/temporal are used from Temporal.
package tools
