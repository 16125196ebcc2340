// Package losscfg holds the loss configurations that workflows carry (preference and policy
// losses, their kinds, aggregation modes, KL estimators and the off-policy correction block) with
// their defaults and validation. It imports only the standard library, so a workflow can decode and
// check a phase's loss config without linking GoMLX; package loss builds the graphs from the same
// types (aliases).
package losscfg
