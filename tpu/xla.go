//go:build xla

package tpu

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gomlx/compute"
	"github.com/gomlx/go-xla/compute/xla"
	"github.com/gomlx/go-xla/pjrt"
)

// xlaLinked reports whether this binary links the XLA/PJRT backend (build tag xla).
const xlaLinked = true

func init() {
	// go-xla downloads missing plugins by default. Temper never fetches anything at run time: the
	// machines it runs on may have no network, and a binary must not change what it runs by itself.
	xla.EnableAutoInstall(false)
}

// newXLABackend loads the PJRT plugin named by plugin ("cpu", "cuda", "tpu", or the path of a
// plugin shared library) and returns the XLA backend on it, or one error saying where plugins were
// looked for and what to install.
func newXLABackend(plugin string) (compute.Backend, error) {
	name := plugin
	if strings.ContainsRune(plugin, os.PathSeparator) || strings.HasSuffix(plugin, ".so") {
		// go-xla takes a non-absolute name as a plugin name, never as a path.
		abs, err := filepath.Abs(plugin)
		if err != nil {
			return nil, fmt.Errorf("tpu: new backend xla: plugin %q: %w", plugin, err)
		}
		if _, err := os.Stat(abs); err != nil {
			return nil, fmt.Errorf("tpu: new backend xla: plugin %q: %w; %s", plugin, err, xlaInstallHint)
		}
		name = abs
	} else {
		found := pjrt.AvailablePlugins() // name → path, each checked with dlopen
		if _, ok := found[name]; !ok {
			versioned := ""
			for n := range found {
				if strings.HasPrefix(n, name+"_v") {
					versioned = n
				}
			}
			if versioned == "" {
				return nil, fmt.Errorf("tpu: new backend xla: no PJRT plugin %q (a file pjrt_c_api_%s_plugin.so) in %s; plugins found: %q; %s",
					plugin, plugin, xlaSearchPaths(), slices.Sorted(maps.Keys(found)), xlaInstallHint)
			}
			name = versioned
		}
	}
	b, err := xla.New(name)
	if err != nil {
		return nil, fmt.Errorf("tpu: new backend xla (plugin %q): %w", plugin, err)
	}
	return b, nil
}

// xlaInstallHint says how to get a plugin; Temper itself never downloads one.
const xlaInstallHint = "install a PJRT plugin and pass its path with --plugin PATH (or put it, named " +
	"pjrt_c_api_<name>_plugin.so, in a directory of $PJRT_PLUGIN_LIBRARY_PATH and pass --plugin <name>): " +
	"on a TPU VM, libtpu.so from the libtpu Python package (--plugin .../site-packages/libtpu/libtpu.so); " +
	"on NVIDIA GPUs, xla_cuda_plugin.so from the jax-cuda12-pjrt Python package with the CUDA and cuDNN " +
	"libraries of jax-cuda12-plugin; on CPU, the pjrt_c_api_cpu_plugin.so that gomlx publishes as " +
	"pjrt-cpu-binaries (Temper never downloads plugins)"

// xlaSearchPaths describes where go-xla looks for a named plugin (pjrt's own list is unexported).
func xlaSearchPaths() string {
	if p, ok := os.LookupEnv("PJRT_PLUGIN_LIBRARY_PATH"); ok {
		return fmt.Sprintf("$PJRT_PLUGIN_LIBRARY_PATH=%q", p)
	}
	var dirs []string
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, ".local", "lib", "go-xla"))
	}
	dirs = append(dirs, "/usr/local/lib/go-xla")
	s := fmt.Sprintf("%q (PJRT_PLUGIN_LIBRARY_PATH unset)", dirs)
	if ld := os.Getenv("LD_LIBRARY_PATH"); ld != "" {
		s += fmt.Sprintf(", $LD_LIBRARY_PATH=%q", ld)
	}
	return s + " and the /etc/ld.so.conf directories"
}
