package config

import "time"

func durationString(ns int64) string { return time.Duration(ns).String() }

func parseDuration(s string) (int64, error) {
	d, err := time.ParseDuration(s)
	return int64(d), err
}

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }
