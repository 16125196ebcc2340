// Package episode runs agentic rollouts: multi-turn episodes in which the policy may call tools.
//
// A policy turn ends at a stop marker (the close of a tool call, or the model's own stop token). If
// the turn holds a tool call (tools.ParseCall's <tool> format, or the model's own through
// Config.Syntax: chat.Format for Qwen3's <tool_call>, Llama 3.1's JSON, Gemma's tool_code), the
// tool runs and its result is appended as a tool message, and the policy continues with everything so far as its prompt; the episode ends
// with a turn without a call (the final answer), after Config.MaxTurns policy turns, or when
// Config.MaxTokens is spent. Every token after the prompt is marked as the policy's (trained on,
// with its behaviour log-probability) or not (tool messages: masked out of the loss).
//
// Pure logic over two small interfaces (a batched Generator and the tokenizer's Codec) and a
// tools.Registry; sampling is seeded per episode and turn, so an episode does not depend on which
// other episodes share its batch.
//
// Assemble is the other way to get an episode: an agent program outside Temper made the model calls
// (through the rollout gateway, which recorded each call's token ids and log-probabilities), and the
// calls become trajectory segments — calls that extend the running context are merged, with the
// tokens the agent wrote in between masked out; any other call starts a new segment.
package episode
