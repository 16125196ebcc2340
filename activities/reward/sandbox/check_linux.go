package sandbox

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Check runs p against the cases, each in a fresh sandbox, and says whether it passed. Zero
// fields of lim take the Sandbox defaults. After a case times out the remaining cases are not
// run (they fail): an endless loop costs one timeout, not one per case. The error is for
// failures of the sandbox or a bad request, never for what the program does.
func (s *Sandbox) Check(ctx context.Context, p Program, cases []TestCase, lim Limits) (Report, error) {
	if err := lim.Validate(); err != nil {
		return Report{}, err
	}
	if len(p.Source) > MaxSource || len(p.GoTest) > MaxSource {
		return Report{Verdict: VerdictFailed, Reason: fmt.Sprintf("program longer than %d bytes", MaxSource), Mode: s.mode}, nil
	}
	lim = lim.withDefaults(s.cfg.Limits)
	switch p.Language {
	case Python:
		if p.GoTest != "" {
			return Report{}, fmt.Errorf("sandbox: check: go_test is for language go only")
		}
		if s.cfg.Python == "" {
			return Report{}, fmt.Errorf("sandbox: check python: no interpreter (set python in the sandbox config)")
		}
		if len(cases) == 0 {
			return Report{}, fmt.Errorf("sandbox: check python: no test cases")
		}
		return s.runCases(ctx, cases, true, func(tc TestCase) Command {
			return Command{Path: s.cfg.Python, Args: []string{"-I", "-B", "main.py"}, Stdin: []byte(tc.Stdin),
				Files: map[string][]byte{"main.py": []byte(p.Source)}, Limits: lim}
		})
	case Go:
		return s.checkGo(ctx, p, cases, lim)
	}
	return Report{}, fmt.Errorf("sandbox: check: language=%q: allowed values: %s, %s", p.Language, Python, Go)
}

// runCases runs one command per case; compare says whether stdout must match (a Go test
// binary passes by its exit status alone).
func (s *Sandbox) runCases(ctx context.Context, cases []TestCase, compare bool, cmd func(TestCase) Command) (Report, error) {
	rep := Report{Total: len(cases), Mode: s.mode}
	timedOut := false
	for _, tc := range cases {
		if timedOut {
			rep.Cases = append(rep.Cases, CaseResult{Reason: "not run: an earlier case timed out or hit the CPU time limit"})
			continue
		}
		r, err := s.Run(ctx, cmd(tc))
		if err != nil {
			return Report{}, err
		}
		cr := CaseResult{
			Reason:   r.Failure(),
			Stdout:   head(string(r.Stdout), 512),
			Stderr:   tail(string(r.Stderr), 1024),
			ExitCode: r.ExitCode,
			Elapsed:  r.Elapsed,
		}
		if cr.Reason == "" && compare && !sameOutput(string(r.Stdout), tc.Stdout) {
			cr.Reason = "wrong output"
		}
		cr.Passed = cr.Reason == ""
		if cr.Passed {
			rep.Passed++
		}
		timedOut = r.TimedOut || r.Limit == LimitCPU
		rep.Cases = append(rep.Cases, cr)
	}
	rep.Verdict = VerdictFailed
	if rep.Total > 0 && rep.Passed == rep.Total {
		rep.Verdict = VerdictPassed
	}
	for i, c := range rep.Cases {
		if !c.Passed {
			rep.Reason = fmt.Sprintf("case %d: %s", i+1, c.Reason)
			break
		}
	}
	return rep, nil
}

// ensureGo finds the toolchain version and prepares the builder-owned cache, once.
func (s *Sandbox) ensureGo() error {
	s.goOnce.Do(func() {
		if s.cfg.GoRoot == "" {
			s.goErr = fmt.Errorf("sandbox: go: no toolchain (set go_root in the sandbox config)")
			return
		}
		b, err := os.ReadFile(filepath.Join(s.cfg.GoRoot, "VERSION"))
		if err != nil {
			s.goErr = fmt.Errorf("sandbox: go: read %s/VERSION: %w", s.cfg.GoRoot, err)
			return
		}
		v, _, _ := strings.Cut(string(b), "\n")
		v = strings.TrimPrefix(strings.TrimSpace(v), "go")
		parts := strings.Split(v, ".")
		if len(parts) < 2 {
			s.goErr = fmt.Errorf("sandbox: go: unexpected version %q in %s/VERSION", v, s.cfg.GoRoot)
			return
		}
		s.goVer = parts[0] + "." + parts[1]
		builder := s.cfg.UIDBase
		if err := os.MkdirAll(s.cfg.GoCache, 0o700); err != nil {
			s.goErr = fmt.Errorf("sandbox: go: mkdir cache %s: %w", s.cfg.GoCache, err)
			return
		}
		fi, err := os.Stat(s.cfg.GoCache)
		if err != nil {
			s.goErr = err
			return
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != builder {
			// A cache from another uid base: hand it over whole.
			s.goErr = filepath.WalkDir(s.cfg.GoCache, func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				return os.Lchown(p, builder, builder)
			})
		}
		if s.goErr == nil {
			s.goErr = os.Chmod(s.cfg.GoCache, 0o700)
		}
		if s.goErr == nil && s.mode == ModeRestricted {
			s.goErr = traversable(filepath.Dir(s.cfg.GoCache))
		}
	})
	return s.goErr
}

// checkGo builds the program once as the builder uid (the only writer of the shared cache), then
// runs the binary per case as a slot uid. `go run` would compile and run in one process, giving
// the program write access to the cache that later builds trust.
func (s *Sandbox) checkGo(ctx context.Context, p Program, cases []TestCase, lim Limits) (Report, error) {
	if err := s.ensureGo(); err != nil {
		return Report{}, err
	}
	if p.GoTest == "" && len(cases) == 0 {
		return Report{}, fmt.Errorf("sandbox: check go: no test cases and no go_test")
	}
	files := map[string][]byte{"go.mod": []byte("module sandbox\n\ngo " + s.goVer + "\n")}
	args := []string{"build", "-o", "prog", "."}
	var plan goTestPlan
	if p.GoTest != "" {
		var reject string
		var err error
		plan, reject, err = planGoTest(p.Source, p.GoTest)
		if err != nil {
			return Report{}, err
		}
		if reject != "" {
			return Report{Verdict: VerdictFailed, Reason: reject, Total: max(len(plan.expected), 1), Mode: s.mode}, nil
		}
		files["solution.go"] = []byte(p.Source)
		files["solution_test.go"] = []byte(p.GoTest)
		if plan.sentinelFile != "" {
			files[plan.sentinelFile] = plan.sentinelSrc
		}
		args = []string{"test", "-c", "-o", "prog", "."}
	} else {
		files["main.go"] = []byte(p.Source)
	}
	bin, out, err := s.goBuild(ctx, files, args)
	if err != nil {
		return Report{}, err
	}
	if bin == nil {
		return Report{Verdict: VerdictFailed, Reason: "build failed", Build: tail(out, 2048), Total: max(len(cases), len(plan.expected), 1), Mode: s.mode}, nil
	}
	runLim := lim
	runLim.Memory += GoAddressReserve
	env := []string{"GOMAXPROCS=2", "GOTRACEBACK=single"}
	if p.GoTest != "" {
		return s.runGoTest(ctx, plan, bin, env, lim, runLim)
	}
	return s.runCases(ctx, cases, true, func(tc TestCase) Command {
		return Command{Path: "./prog", Stdin: []byte(tc.Stdin), Env: env,
			Files: map[string][]byte{"prog": bin}, Exec: []string{"prog"}, Limits: runLim, treeMemory: lim.Memory + lim.Disk}
	})
}

// runGoTest runs the test binary once and judges it from its test events (see gotest.go).
func (s *Sandbox) runGoTest(ctx context.Context, plan goTestPlan, bin []byte, env []string, lim, runLim Limits) (Report, error) {
	r, err := s.Run(ctx, Command{Path: "./prog",
		Args: []string{"-test.v=test2json", "-test.count=1", "-test.paniconexit0", "-test.timeout=" + lim.Timeout.String()},
		Env:  env, Files: map[string][]byte{"prog": bin}, Exec: []string{"prog"}, Limits: runLim,
		treeMemory: lim.Memory + lim.Disk})
	if err != nil {
		return Report{}, err
	}
	cases, reason := judgeGoTest(plan, r)
	rep := Report{Verdict: VerdictFailed, Reason: reason, Total: len(cases), Cases: cases, Mode: s.mode}
	for _, c := range cases {
		if c.Passed {
			rep.Passed++
		}
	}
	if reason == "" {
		rep.Verdict = VerdictPassed
	}
	if len(rep.Cases) > 0 {
		c := &rep.Cases[0]
		// The framing markers mean nothing to a reader of the feedback.
		out := strings.ReplaceAll(string(r.Stdout), testMarker, "")
		c.Stdout, c.Stderr, c.ExitCode, c.Elapsed = head(out, 512), tail(string(r.Stderr), 1024), r.ExitCode, r.Elapsed
	}
	return rep, nil
}

// goBuild compiles files with `go <args>` and returns the binary "prog", or nil and the
// compiler output when the build failed.
func (s *Sandbox) goBuild(ctx context.Context, files map[string][]byte, args []string) ([]byte, string, error) {
	slot, err := s.acquire(ctx)
	if err != nil {
		return nil, "", err
	}
	defer s.release(slot)
	builder := s.cfg.UIDBase
	dir, err := s.newWorkDir(builder)
	if err != nil {
		return nil, "", err
	}
	defer os.RemoveAll(dir)
	for name, data := range files {
		if err := writeFile(dir, name, data, 0o644, builder); err != nil {
			return nil, "", err
		}
	}
	// TMPDIR must not be the module root: the go command ignores a go.mod in the temp root.
	tmp := filepath.Join(dir, ".tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return nil, "", fmt.Errorf("sandbox: go build: %w", err)
	}
	if err := os.Chown(tmp, builder, builder); err != nil {
		return nil, "", fmt.Errorf("sandbox: go build: %w", err)
	}
	work, cache := dir, s.cfg.GoCache
	var binds []bindMount
	if s.mode == ModeIsolated {
		work, cache = insideWork, insideGoCache
		binds = []bindMount{{Src: s.cfg.GoCache, Dst: insideGoCache}}
	}
	env := []string{
		"GOROOT=" + s.cfg.GoRoot, "GOCACHE=" + cache, "GOPATH=" + work + "/.gopath",
		"GOTOOLCHAIN=local", "GOFLAGS=-mod=mod -buildvcs=false", "GOWORK=off", "GOPROXY=off", "GOSUMDB=off",
		"CGO_ENABLED=0", "GOENV=off", "GOTELEMETRY=off", "PATH=" + s.cfg.GoRoot + "/bin:/usr/bin:/bin",
		"TMPDIR=" + work + "/.tmp",
	}
	buildLim := s.cfg.BuildLimits
	buildLim.Disk = 0 // the build directory is bound, not copied: the binary must come back
	// The tree's CPU time is not bounded: the compiler runs in parallel; the wall clock bounds it.
	r, err := s.spawn(ctx, job{uid: builder, workDir: dir, binds: binds, path: filepath.Join(s.cfg.GoRoot, "bin", "go"),
		args: args, env: env, limits: buildLim, memory: buildLim.Memory})
	if err != nil {
		return nil, "", fmt.Errorf("sandbox: go build: %w", err)
	}
	out := string(r.Stderr) + string(r.Stdout)
	if f := r.Failure(); f != "" {
		if r.TimedOut {
			out = "build timed out\n" + out
		}
		return nil, strings.ReplaceAll(out, work+"/", ""), nil
	}
	bin, err := readRegular(filepath.Join(dir, "prog"))
	if err != nil {
		return nil, "", fmt.Errorf("sandbox: go build: %w", err)
	}
	return bin, "", nil
}

// readRegular reads a regular file without following symlinks.
func readRegular(p string) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	b := make([]byte, fi.Size())
	_, err = io.ReadFull(f, b)
	return b, err
}
