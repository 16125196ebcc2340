// Package config decodes YAML or JSON into plain Go structs strictly: an unknown field is an error that
// names its path and suggests the closest valid field; `--set a.b.c=value` overrides apply before decoding;
// Explain lists a struct's fields with type, default and help for `temper config explain`.
//
// It is pure (standard library and gopkg.in/yaml.v3 only) so that every layer, workflows included, may use
// it: decoding is deterministic.
package config
