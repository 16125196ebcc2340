// Package agenttest reads what the example agents (scripts/agents) log for the tests that run them:
// with TEMPER_AGENT_LOG=- an agent prints every chat completion it got after its answer, and the
// tests compare those responses with the trajectories the trainer sees. The response type is
// decoded here on its own, not with the server's types, so a change to what the server sends shows.
// Only tests import it.
package agenttest
