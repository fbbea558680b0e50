package policies

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/abi/params"
	"github.com/wasmsched/wasmsched/policies/internal/wasmrewrite"
)

// Export names of the ABI (abi/ABI.md; the same in every version).
const (
	exportABIVersion = "wasmsched_abi_version"
	exportKind       = "wasmsched_kind"
	// exportParams is the optional declaration of the group parameters
	// a policy reads (abi/params)
	exportParams = "wasmsched_params"
	exportInput  = "wasmsched_input"
	exportDecide = "wasmsched_decide"
	exportMemory = "memory"
)

var i32, i64 = api.ValueTypeI32, api.ValueTypeI64

var requiredFuncs = []struct {
	name    string
	params  []api.ValueType
	results []api.ValueType
}{
	{exportABIVersion, nil, []api.ValueType{i32}},
	{exportKind, nil, []api.ValueType{i32}},
	{exportInput, []api.ValueType{i32}, []api.ValueType{i32}},
	{exportDecide, []api.ValueType{i32}, []api.ValueType{i64}},
}

// Runtime compiles and sandboxes policy plugins. One wazero runtime with a
// shared compilation cache; safe for concurrent use.
type Runtime struct {
	cfg   Config
	rt    wazero.Runtime
	cache wazero.CompilationCache
	log   *slog.Logger

	mu        sync.Mutex
	closed    bool            // Close began: no new compile starts
	inflight  sync.WaitGroup  // compiles bounded still runs (also ones it gave up on)
	closing   context.Context // cancelled by Close: stops those compiles at their next function
	stopAll   context.CancelFunc
	compiling map[[sha256.Size]byte]*compileLock // see compile
	validator wazero.Runtime                     // interpreter engine, for validate; made on first use
	validated map[[sha256.Size]byte]bool         // modules validate passed (bounded)
}

type compileLock struct {
	mu    sync.Mutex
	users int // goroutines holding or waiting for mu (guarded by Runtime.mu)
}

// compile is CompileModule, serialised per module. wazero 1.12 publishes a
// module it reads from the file cache to its in-memory cache before it has
// built the module's entry preambles (engine_cache.go, getCompiledModule),
// so a concurrent compile of the same bytes could return a half-built
// module whose first ExportedFunction panicked (index out of range). A
// multi-namespace host loads the same built-ins in every namespace at
// once, so this happened. With one compile of given bytes at a time, the
// second finds the finished module in memory. Different modules still
// compile in parallel. Upstream: https://github.com/wazero/wazero/issues/2547
// (open); drop the lock when a wazero release fixes it.
func (r *Runtime) compile(ctx context.Context, code []byte) (wazero.CompiledModule, error) {
	key := sha256.Sum256(code)
	r.mu.Lock()
	if r.compiling == nil {
		r.compiling = map[[sha256.Size]byte]*compileLock{}
	}
	l := r.compiling[key]
	if l == nil {
		l = &compileLock{}
		r.compiling[key] = l
	}
	l.users++
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		if l.users--; l.users == 0 {
			delete(r.compiling, key)
		}
		r.mu.Unlock()
	}()
	l.mu.Lock()
	defer l.mu.Unlock()
	return r.rt.CompileModule(experimental.WithCompilationWorkers(ctx, 2), code)
}

// DefaultCacheDir returns os.UserCacheDir()/wasmsched/wazero.
func DefaultCacheDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "wasmsched", "wazero"), nil
}

// NewRuntime creates a runtime. Close it when done.
func NewRuntime(ctx context.Context, cfg Config) (*Runtime, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	r := &Runtime{cfg: cfg, log: cfg.Logger}
	r.closing, r.stopAll = context.WithCancel(context.Background())
	rc := wazero.NewRuntimeConfigCompiler().
		WithCloseOnContextDone(cfg.Termination == TerminationWazero).
		WithMemoryLimitPages(uint32(cfg.MemoryLimit / wasmPageSize))
	if cfg.CacheDir != "-" {
		dir := cfg.CacheDir
		if dir == "" {
			d, err := DefaultCacheDir()
			if err != nil {
				return nil, fmt.Errorf("policies: no cache dir: %w (set Config.CacheDir)", err)
			}
			dir = d
		}
		c, err := wazero.NewCompilationCacheWithDir(dir)
		if err != nil {
			return nil, fmt.Errorf("policies: compilation cache %s: %w", dir, err)
		}
		r.cache = c
		rc = rc.WithCompilationCache(c)
	}
	r.rt = wazero.NewRuntimeWithConfig(ctx, rc)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, r.rt); err != nil {
		_ = r.Close(ctx)
		return nil, fmt.Errorf("policies: WASI: %w", err)
	}
	return r, nil
}

// Close closes the runtime, every policy loaded from it, and the cache handle.
// A compile still running (one a caller gave up on at its deadline, or a
// Load in flight) is cancelled and waited for first: closing the wazero
// runtimes under it would crash it (TestRuntime_closeDuringLoad).
func (r *Runtime) Close(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	if r.stopAll != nil {
		r.stopAll()
	}
	r.inflight.Wait()
	err := r.rt.Close(ctx)
	r.mu.Lock()
	v := r.validator
	r.mu.Unlock()
	if v != nil {
		err = errors.Join(err, v.Close(ctx))
	}
	if r.cache != nil {
		err = errors.Join(err, r.cache.Close(ctx))
	}
	return err
}

// Config returns the effective configuration (defaults applied).
func (r *Runtime) Config() Config { return r.cfg }

// Load compiles wasm, checks it against the ABI (its version, exports and their
// signatures, version marker, kind) and instantiates one instance, which
// proves the guest's _initialize works. The returned Policy owns a pool of
// instances; Close it when it is no longer used.
func (r *Runtime) Load(ctx context.Context, name string, wasm []byte) (*Policy, error) {
	if err := checkMagic(name, wasm); err != nil {
		return nil, err
	}
	if _, err := checkLimits(r.cfg, name, wasm); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(wasm)
	if err := r.validate(ctx, name, sum, wasm); err != nil {
		return nil, err
	}
	p := &Policy{
		rt:      r,
		name:    name,
		version: hex.EncodeToString(sum[:]),
		sem:     make(chan struct{}, r.cfg.PoolSize),
		done:    make(chan struct{}),
	}
	code := wasm
	if r.cfg.Termination == TerminationInline {
		rw, st, err := wasmrewrite.Rewrite(wasm)
		if err != nil {
			return nil, fmt.Errorf("%w: policy %q: compile: instrumenting for the call deadline: %v (Config.Termination %q does not need it)", ErrNotWasm, name, err, TerminationWazero)
		}
		if st.HasStart {
			return nil, fmt.Errorf("%w: policy %q has a start function, which no deadline could stop under Config.Termination %q (use %q, or export _initialize instead)", ErrNotWasm, name, TerminationInline, TerminationWazero)
		}
		code = rw
	}
	compiled, err := r.bounded(ctx, func(ctx context.Context) (wazero.CompiledModule, error) { return r.compile(ctx, code) })
	if err != nil {
		if errors.Is(err, ErrCompileTimeout) {
			return nil, fmt.Errorf("%w: policy %q: compiling took longer than %v (Config.CompileTimeout)", ErrCompileTimeout, name, r.cfg.CompileTimeout)
		}
		return nil, fmt.Errorf("%w: policy %q: compile: %v", ErrNotWasm, name, err)
	}
	p.compiled = compiled
	if err := checkExports(compiled); err != nil {
		_ = compiled.Close(ctx)
		return nil, fmt.Errorf("%w: policy %q: %v", ErrMissingExport, name, err)
	}
	inst, err := p.newInstance(ctx)
	if err != nil {
		_ = compiled.Close(ctx)
		return nil, err
	}
	fail := func(err error) (*Policy, error) {
		inst.close()
		_ = compiled.Close(ctx)
		return nil, err
	}
	ver, err := inst.call0(ctx, r.cfg.CallTimeout, exportABIVersion)
	if err != nil {
		return fail(loadCallError(name, exportABIVersion, err))
	}
	if ver < abi.MinVersion || ver > abi.Version {
		return fail(fmt.Errorf("%w: policy %q exports ABI version %d, this host supports %d to %d", ErrABIVersion, name, int32(ver), abi.MinVersion, abi.Version))
	}
	p.abi = uint32(ver)
	k, err := inst.call0(ctx, r.cfg.CallTimeout, exportKind)
	if err != nil {
		return fail(loadCallError(name, exportKind, err))
	}
	p.kind = abi.Kind(k)
	if !p.kind.Valid() {
		return fail(fmt.Errorf("%w: policy %q exports kind %d, want %d (serial), %d (slot-reuse) or %d (allocation)", ErrKind, name, k, abi.KindSerial, abi.KindSlotReuse, abi.KindAllocation))
	}
	if p.kind == abi.KindAllocation && p.abi < 4 {
		return fail(fmt.Errorf("%w: policy %q is an allocation policy exporting ABI version %d: allocation records are version 4", ErrABIVersion, name, p.abi))
	}
	if p.params, err = readParams(ctx, r.cfg, name, compiled, inst); err != nil {
		return fail(err)
	}
	p.hot.Store(inst)
	return p, nil
}

// readParams reads what the module declares of its group parameters: the
// optional export wasmsched_params, () -> ptr<<32|len of an abi/params
// encoding (0: none), called once within the call deadline; at most
// params.MaxEncoded bytes, decoded and checked (a bad declaration refuses
// the module).
func readParams(ctx context.Context, cfg Config, name string, c wazero.CompiledModule, inst *instance) ([]params.Param, error) {
	d, ok := c.ExportedFunctions()[exportParams]
	if !ok {
		return nil, nil
	}
	if len(d.ParamTypes()) != 0 || !slices.Equal(d.ResultTypes(), []api.ValueType{api.ValueTypeI64}) {
		return nil, fmt.Errorf("%w: policy %q: %s has signature %s, want ()->(i64)", ErrMissingExport, name, exportParams,
			sig(d.ParamTypes(), d.ResultTypes()))
	}
	v, err := inst.call0u64(ctx, cfg.CallTimeout, exportParams)
	if err != nil {
		return nil, loadCallError(name, exportParams, err)
	}
	ptr, n := uint32(v>>32), uint32(v)
	if v == 0 {
		return nil, nil
	}
	if n > params.MaxEncoded {
		return nil, fmt.Errorf("%w: policy %q: %s declares %d bytes, at most %d", ErrInstantiate, name, exportParams, n, params.MaxEncoded)
	}
	b, ok := inst.mod.Memory().Read(ptr, n)
	if !ok {
		return nil, fmt.Errorf("%w: policy %q: %s returned %d bytes at %d, outside its memory", ErrInstantiate, name, exportParams, n, ptr)
	}
	ps, err := params.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("%w: policy %q: %s: %v", ErrInstantiate, name, exportParams, err)
	}
	return ps, nil
}

// checkMagic checks the wasm magic and the core module version.
func checkMagic(name string, wasm []byte) error {
	if len(wasm) < 8 || !bytes.Equal(wasm[:4], []byte("\x00asm")) {
		head := wasm[:min(len(wasm), 8)]
		return fmt.Errorf("%w: policy %q: %d bytes starting %q, want the wasm magic \"\\x00asm\"", ErrNotWasm, name, len(wasm), head)
	}
	if !bytes.Equal(wasm[4:8], []byte{1, 0, 0, 0}) {
		return fmt.Errorf("%w: policy %q: binary format version % x, want 01 00 00 00 (core module)", ErrNotWasm, name, wasm[4:8])
	}
	return nil
}

func checkExports(c wazero.CompiledModule) error {
	funcs := c.ExportedFunctions()
	var missing, wrong []string
	for _, f := range requiredFuncs {
		d, ok := funcs[f.name]
		if !ok {
			missing = append(missing, f.name)
			continue
		}
		if !slices.Equal(d.ParamTypes(), f.params) || !slices.Equal(d.ResultTypes(), f.results) {
			wrong = append(wrong, fmt.Sprintf("%s has signature %s, want %s", f.name,
				sig(d.ParamTypes(), d.ResultTypes()), sig(f.params, f.results)))
		}
	}
	if _, ok := c.ExportedMemories()[exportMemory]; !ok {
		missing = append(missing, exportMemory+" (memory)")
	}
	var msgs []string
	if len(missing) > 0 {
		msgs = append(msgs, "missing exports: "+strings.Join(missing, ", "))
	}
	msgs = append(msgs, wrong...)
	if len(msgs) > 0 {
		return errors.New(strings.Join(msgs, "; "))
	}
	return nil
}

func sig(params, results []api.ValueType) string {
	names := func(ts []api.ValueType) string {
		s := make([]string, len(ts))
		for i, t := range ts {
			s[i] = api.ValueTypeName(t)
		}
		return strings.Join(s, ",")
	}
	return "(" + names(params) + ")->(" + names(results) + ")"
}

// validate runs wazero's own validation on the module exactly as given,
// before any rewrite: the rewrite appends globals and a function, so a
// module naming indices it never declared would become valid after it.
// wazero's interpreter engine decodes and validates without generating
// machine code (about a tenth of a compile); a module that passed is
// remembered by sha256 for the process, so a version loaded again (hot
// swap back, another namespace) is not validated twice.
func (r *Runtime) validate(ctx context.Context, name string, sum [sha256.Size]byte, wasm []byte) error {
	r.mu.Lock()
	ok := r.validated[sum]
	if !ok && r.validator == nil {
		r.validator = wazero.NewRuntimeWithConfig(context.Background(), wazero.NewRuntimeConfigInterpreter().
			WithMemoryLimitPages(uint32(r.cfg.MemoryLimit/wasmPageSize)))
	}
	v := r.validator
	r.mu.Unlock()
	if ok {
		return nil
	}
	cm, err := r.bounded(ctx, func(ctx context.Context) (wazero.CompiledModule, error) { return v.CompileModule(ctx, wasm) })
	if err != nil {
		if errors.Is(err, ErrCompileTimeout) {
			return fmt.Errorf("%w: policy %q: validating took longer than %v (Config.CompileTimeout)", ErrCompileTimeout, name, r.cfg.CompileTimeout)
		}
		return fmt.Errorf("%w: policy %q: invalid module: %v", ErrNotWasm, name, err)
	}
	_ = cm.Close(context.Background())
	r.mu.Lock()
	if r.validated == nil || len(r.validated) >= maxValidated {
		r.validated = map[[sha256.Size]byte]bool{}
	}
	r.validated[sum] = true
	r.mu.Unlock()
	return nil
}

// bounded runs compile (a wazero CompileModule) under
// Config.CompileTimeout. wazero checks the context between functions, not
// inside one, so on timeout bounded returns at once with ErrCompileTimeout
// and leaves the compile to stop by itself at its next function (the
// static limits bound one function's cost); a module it still produces is
// closed, so nothing of a timed-out compile is kept. ctx cancels it too.
func (r *Runtime) bounded(ctx context.Context, compile func(context.Context) (wazero.CompiledModule, error)) (wazero.CompiledModule, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, errors.New("policies: runtime closed")
	}
	r.inflight.Add(1)
	r.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, r.cfg.CompileTimeout)
	stopOnClose := context.AfterFunc(r.closing, cancel)
	type result struct {
		m   wazero.CompiledModule
		err error
	}
	ch := make(chan result, 1)
	go func() {
		defer r.inflight.Done()
		defer stopOnClose()
		m, err := compile(cctx)
		ch <- result{m, err}
	}()
	select {
	case res := <-ch:
		timedOut := cctx.Err() != nil
		cancel()
		if res.err != nil && timedOut && ctx.Err() == nil {
			return nil, ErrCompileTimeout
		}
		if res.err != nil && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return res.m, res.err
	case <-cctx.Done():
		cancel()
		go func() {
			if res := <-ch; res.m != nil {
				_ = res.m.Close(context.Background())
			}
		}()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, ErrCompileTimeout
	}
}
