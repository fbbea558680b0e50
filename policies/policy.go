package policies

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/abi/params"
	"github.com/wasmsched/wasmsched/internal/abicodec"
	"github.com/wasmsched/wasmsched/internal/digest"
	"github.com/wasmsched/wasmsched/policies/internal/wasmrewrite"
)

// Policy is one loaded policy version with its pool of instances. Safe for
// concurrent use: each call takes an instance for itself, so at most
// Config.PoolSize calls run at once (others wait for an instance).
type Policy struct {
	rt       *Runtime
	name     string
	version  string
	kind     abi.Kind
	abi      uint32 // the ABI version the module exports
	compiled wazero.CompiledModule
	params   []params.Param // what it declares (wasmsched_params); nil: nothing declared

	sem  chan struct{} // one token per call in flight
	done chan struct{} // closed by Close
	// hot is the instance a call gave back last, taken without the lock
	// (sequential calls reuse one warm instance); the others are in free.
	hot    atomic.Pointer[instance]
	closed atomic.Bool // set by Close
	mu     sync.Mutex
	free   []*instance
}

// Version returns the sha256 (hex) of the policy's wasm bytes.
func (p *Policy) Version() string { return p.version }

// Kind returns what the policy decides.
func (p *Policy) Kind() abi.Kind { return p.kind }

// ABIVersion returns the ABI version the module exports (abi.MinVersion to
// abi.Version).
func (p *Policy) ABIVersion() uint32 { return p.abi }

// Params returns the group parameters the module declares (the optional
// export wasmsched_params, abi/params); nil when it declares none.
func (p *Policy) Params() []params.Param { return p.params }

// Close waits for the calls in flight (or ctx), then closes every instance
// and the compiled module. Later calls return ErrClosed. Idempotent.
func (p *Policy) Close(ctx context.Context) error {
	if p.closed.Swap(true) {
		return nil
	}
	close(p.done)
	for range cap(p.sem) {
		select {
		case p.sem <- struct{}{}:
		case <-ctx.Done():
			return fmt.Errorf("policies: close %q: waiting for calls in flight: %w", p.name, ctx.Err())
		}
	}
	p.mu.Lock()
	free := p.free
	p.free = nil
	p.mu.Unlock()
	if inst := p.hot.Swap(nil); inst != nil {
		free = append(free, inst)
	}
	for _, inst := range free {
		inst.close()
	}
	return p.compiled.Close(ctx)
}

// instance is one instantiated module, used by one goroutine at a time.
type instance struct {
	mod    api.Module
	mem    api.Memory
	input  api.Function
	decide api.Function
	out    *ring
	stack  [1]uint64
	inPtr  uint32 // guest input buffer from the last wasmsched_input
	inCap  uint32 // bytes it was granted for
	enc    []byte // host encode buffer, reused
	v      validator
	dl     deadline
	// interned reasons: guests return the same few reason strings; the
	// latest few are compared first, then the map
	recent  [4]string
	nrecent int
	reasons map[string]string
	// the guest addresses of the reasons interned in this call and what
	// they were interned as (SDKs write a reason once per decision and
	// point every action giving it at the same bytes)
	seenPtr [4]*byte
	seenOut [4]string
	nseen   int
	// memAtStart is the guest memory's size when the call started (a trap
	// after growing to the cap is reported as such)
	memAtStart uint32
}

// deadline is an instance's reusable call context, armed by a reusable
// per-instance timer (made once per instance, not per call). When the call
// deadline passes the timer's function (fire) stops the guest:
//
//   - inline mode (Config.Termination "inline"): it sets the instance's stop
//     global, then zeroes its budget global, both injected into the module
//     at load by wasmrewrite. The globals live in Go memory owned by wazero
//     (the module's context buffer); compiled code loads the budget afresh
//     at every check at a function entry or loop header (each is the start
//     of a basic block, so the compiler has no earlier value to reuse), so
//     the guest sees the exhausted budget at its next check, calls the
//     injected $yield, finds the stop flag set and traps with `unreachable`.
//     $yield also runs every wasmrewrite.YieldEvery checks and exits to Go
//     (memory.grow 0): compiled guest code is not preemptible, and a guest
//     that never returned to Go would block a stop-the-world (GC) forever,
//     with this timer unable to run. The call's context has no Done
//     channel, so wazero starts no watcher goroutine. The guest's sleeps
//     (WASI poll_oneoff) are cut short by wake.
//   - wazero mode ("wazero"): its Done channel is closed; wazero (with
//     WithCloseOnContextDone) watches it and closes the module, which stops
//     the guest at its next check.
//
// It replaces a context.WithTimeout per call. Once the timer has fired the
// instance is thrown away, so a set flag or closed channel is never reused.
type deadline struct {
	parent   context.Context   // the caller's context, for Value only
	done     chan struct{}     // wazero mode only; nil (never done) inline
	stop     api.MutableGlobal // inline mode only
	budget   api.MutableGlobal // inline mode only
	wake     chan struct{}     // cap 1: interrupts a guest sleep
	fired    atomic.Bool
	timeout  time.Duration // of the current (or last) call, for messages
	canceled atomic.Bool   // fired because the caller's context ended, not the deadline

	// The timer is not set and stopped around every call (that took a
	// third of the host's own time per decision): each call stores its
	// deadline in end, and the timer, once set, stays set. When it fires
	// (tick) it stops the call in flight if that call's deadline has
	// passed, sets itself again for the call's deadline if not, and stays
	// off when no call is in flight (the next call sets it). at is when the
	// timer is set to fire (0: not set); it and the timer change under mu.
	timer *time.Timer
	end   atomic.Int64 // the deadline of the call in flight (since epoch); 0: none; -1: fired
	at    atomic.Int64
	mu    sync.Mutex
}

// epoch is the origin of deadline.end: time.Since(epoch) reads only the
// monotonic clock.
var epoch = time.Now()

func now() int64 { return int64(time.Since(epoch)) }

// arm makes the timer fire at or before e (a deadline since epoch).
func (d *deadline) arm(e int64) {
	if a := d.at.Load(); a != 0 && a <= e {
		return // set to fire no later: the usual case, no lock, no timer call
	}
	d.mu.Lock()
	if a := d.at.Load(); a == 0 || a > e {
		d.at.Store(e)
		d.timer.Reset(time.Duration(e - now()))
	}
	d.mu.Unlock()
}

// tick is the timer's function: see deadline.timer.
func (d *deadline) tick() {
	d.mu.Lock()
	d.at.Store(0)
	for {
		e := d.end.Load()
		if e <= 0 {
			break // no call in flight (or fired already)
		}
		if t := now(); t < e {
			d.at.Store(e) // an earlier call's time: wait for this one's
			d.timer.Reset(time.Duration(e - t))
			break
		}
		if d.end.CompareAndSwap(e, -1) {
			d.mu.Unlock()
			d.fire()
			return
		}
		// the call ended (and maybe another began) meanwhile: look again
	}
	d.mu.Unlock()
}

func (d *deadline) Deadline() (time.Time, bool) { return time.Time{}, false }
func (d *deadline) Done() <-chan struct{}       { return d.done }
func (d *deadline) Value(key any) any           { return d.parent.Value(key) }
func (d *deadline) Err() error {
	if d.fired.Load() {
		return context.DeadlineExceeded
	}
	return nil
}

func (d *deadline) init(inline bool) {
	d.wake = make(chan struct{}, 1)
	if !inline {
		d.done = make(chan struct{})
	}
	d.timer = time.AfterFunc(time.Hour, d.tick)
	d.timer.Stop()
}

func (d *deadline) fire() {
	d.fired.Store(true)
	if d.stop != nil {
		// $stop first: the guest traps when its next check finds $budget
		// exhausted and then $stop set (see wasmrewrite).
		d.stop.Set(1)
		d.budget.Set(0)
	}
	if d.done != nil {
		close(d.done)
	}
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// sleep is the guest's nanosleep (WASI poll_oneoff on a clock): a real
// sleep, cut short when the call deadline fires, so that a sleeping guest
// cannot outlive its deadline; its next loop header or call then traps.
func (d *deadline) sleep(ns int64) {
	if ns <= 0 || d.fired.Load() {
		return
	}
	t := time.NewTimer(time.Duration(ns))
	defer t.Stop()
	select {
	case <-t.C:
	case <-d.wake:
	}
}

// call runs f under the call deadline (timeout, or ctx's own deadline if
// sooner). ctx must not be done already. It reports whether the instance
// is still usable: false if the timer fired, even if f completed.
func (inst *instance) call(ctx context.Context, timeout time.Duration, f func(context.Context) error) (usable bool, err error) {
	d := &inst.dl
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	d.parent = ctx
	d.timeout = timeout
	if timeout > time.Second && ctx.Done() != nil {
		// A long deadline (an author's offline try, a slow _initialize):
		// cancelling ctx (SIGTERM in the CLI) stops the guest too. Short
		// calls, the hosts' case, end by their deadline anyway and pay
		// nothing for this.
		stop := context.AfterFunc(ctx, func() {
			d.canceled.Store(true)
			d.end.Store(-1)
			d.fire()
		})
		defer stop()
	}
	e := now() + int64(timeout)
	d.end.Store(e)
	d.arm(e)
	err = f(d)
	usable = d.end.CompareAndSwap(e, 0) && !d.fired.Load()
	d.parent = nil
	return usable, err
}

func (p *Policy) newInstance(ctx context.Context) (*instance, error) {
	cfg := p.rt.cfg
	inline := cfg.Termination == TerminationInline
	inst := &instance{reasons: map[string]string{}}
	out := &ring{max: cfg.StderrLimit, fired: &inst.dl.fired}
	inst.out = out
	inst.dl.init(inline)
	mc := wazero.NewModuleConfig().
		WithName(""). // anonymous: many instances of one module may coexist
		WithStartFunctions("_initialize").
		WithSysNanotime().WithSysWalltime().WithSysNanosleep().
		WithRandSource(guardedRand{fired: &inst.dl.fired}).
		WithStdout(out).WithStderr(out)
	// The guest's sleeps end when the call deadline fires (both modes).
	mc = mc.WithNanosleep(inst.dl.sleep)
	ictx := ctx
	if inline {
		// _initialize is called below, under the stop flag.
		mc = mc.WithStartFunctions()
	} else {
		var cancel context.CancelFunc
		ictx, cancel = context.WithTimeout(ctx, cfg.InitTimeout)
		defer cancel()
	}
	fail := func(err error) (*instance, error) {
		err = fmt.Errorf("%w: policy %q (%s): %w%s", ErrInstantiate, p.name, digest.Short(p.version), err, guestOutput(out))
		p.rt.log.Warn("policy instantiate failed", "policy", p.name, "version", p.version, "err", err)
		return nil, err
	}
	mod, err := p.rt.rt.InstantiateModule(ictx, p.compiled, mc)
	if err != nil {
		return fail(err)
	}
	inst.mod = mod
	if inline {
		g, ok := mod.ExportedGlobal(wasmrewrite.StopExport).(api.MutableGlobal)
		b, ok2 := mod.ExportedGlobal(wasmrewrite.BudgetExport).(api.MutableGlobal)
		if !ok || !ok2 {
			inst.close()
			return fail(fmt.Errorf("instance lacks the mutable %s/%s globals", wasmrewrite.StopExport, wasmrewrite.BudgetExport))
		}
		inst.dl.stop, inst.dl.budget = g, b
		if init := mod.ExportedFunction("_initialize"); init != nil {
			_, err := inst.call(ctx, cfg.InitTimeout, func(c context.Context) error {
				_, err := init.Call(c)
				return err
			})
			if err != nil || inst.dl.fired.Load() {
				inst.close()
				if inst.dl.canceled.Load() {
					return nil, fmt.Errorf("policies: policy %q: _initialize canceled: %w", p.name, ctx.Err())
				}
				if inst.dl.fired.Load() {
					return fail(deadlineFailure("_initialize", inst.dl.timeout, "Config.InitTimeout"))
				}
				return fail(trapFailure("_initialize", err))
			}
		}
	}
	inst.mem = mod.Memory()
	inst.input = mod.ExportedFunction(exportInput)
	inst.decide = mod.ExportedFunction(exportDecide)
	if inst.mem == nil || inst.input == nil || inst.decide == nil {
		inst.close()
		return nil, fmt.Errorf("%w: policy %q: instance lacks memory or exports", ErrMissingExport, p.name)
	}
	return inst, nil
}

func (inst *instance) close() {
	inst.dl.timer.Stop() // it may still be set after the last call: let the instance go now
	_ = inst.mod.Close(context.Background())
}

// maxGuestOutput bounds the guest output quoted in an error (its head,
// where a Go guest's panic message is); the instance's ring keeps more.
const maxGuestOutput = 512

func guestOutput(r *ring) string {
	s := r.String()
	if s == "" {
		return ""
	}
	return "; guest output: " + truncate(strings.TrimSpace(s), maxGuestOutput)
}

// call0 calls a no-argument export returning i32.
func (inst *instance) call0(ctx context.Context, timeout time.Duration, name string) (uint32, error) {
	v, err := inst.call0u64(ctx, timeout, name)
	return uint32(v), err
}

// call0u64 calls export name (no argument) within timeout and returns its
// whole 64-bit result.
func (inst *instance) call0u64(ctx context.Context, timeout time.Duration, name string) (uint64, error) {
	f := inst.mod.ExportedFunction(name)
	usable, err := inst.call(ctx, timeout, func(c context.Context) error {
		return f.CallWithStack(c, inst.stack[:])
	})
	switch {
	case !usable || inst.dl.fired.Load():
		return 0, deadlineFailure(name, inst.dl.timeout, "Config.CallTimeout")
	case err != nil:
		return 0, trapFailure(name, err)
	}
	return inst.stack[0], nil
}

// inputBuf returns a view of the guest's input buffer for n bytes, asking
// the guest for a larger one (wasmsched_input) when the last is too
// small. The view is valid until the guest next runs (memory may grow).
func (inst *instance) inputBuf(ctx context.Context, n int) ([]byte, error) {
	inst.nseen = 0 // intern's fast path: guest memory changes with every call
	inst.memAtStart = inst.mem.Size()
	if uint64(n) > abicodec.MaxRecordSize {
		return nil, fmt.Errorf("input of %d bytes exceeds %d", n, abicodec.MaxRecordSize)
	}
	if uint32(n) > inst.inCap || inst.inPtr == 0 {
		inst.stack[0] = uint64(n)
		if err := inst.input.CallWithStack(ctx, inst.stack[:]); err != nil {
			return nil, err
		}
		ptr := uint32(inst.stack[0])
		if ptr == 0 {
			return nil, fmt.Errorf("%s(%d) returned 0 (guest cannot hold the input)", exportInput, n)
		}
		inst.inPtr, inst.inCap = ptr, uint32(n)
	}
	b, ok := inst.mem.Read(inst.inPtr, uint32(n))
	if !ok {
		return nil, fmt.Errorf("input buffer [%d,+%d) outside guest memory of %d bytes", inst.inPtr, n, inst.mem.Size())
	}
	return b, nil
}

// decideIn calls wasmsched_decide on the first n bytes of the input buffer
// and returns a view of the guest's output (valid until the next call).
func (inst *instance) decideIn(ctx context.Context, n int) ([]byte, error) {
	inst.stack[0] = uint64(n)
	if err := inst.decide.CallWithStack(ctx, inst.stack[:]); err != nil {
		return nil, err
	}
	res := inst.stack[0]
	ptr, size := uint32(res>>32), uint32(res)
	if ptr == 0 {
		return nil, fmt.Errorf("%s returned error code %d", exportDecide, size)
	}
	out, ok := inst.mem.Read(ptr, size)
	if !ok {
		return nil, fmt.Errorf("output [%d,+%d) outside guest memory of %d bytes", ptr, size, inst.mem.Size())
	}
	return out, nil
}

func (inst *instance) intern(s string) string {
	// The same guest bytes as an earlier action's reason in this call: no
	// compare needed.
	p := unsafe.StringData(s)
	for i := range inst.nseen {
		if inst.seenPtr[i] == p && len(inst.seenOut[i]) == len(s) && p != nil {
			return inst.seenOut[i]
		}
	}
	r := inst.internSlow(s)
	if inst.nseen < len(inst.seenPtr) {
		inst.seenPtr[inst.nseen], inst.seenOut[inst.nseen] = p, r
		inst.nseen++
	}
	return r
}

func (inst *instance) internSlow(s string) string {
	for _, r := range inst.recent[:inst.nrecent] {
		if r == s {
			return r
		}
	}
	r, ok := inst.reasons[s]
	if !ok {
		r = strings.Clone(s)
		if len(inst.reasons) < 64 {
			inst.reasons[r] = r
		}
	}
	if inst.nrecent < len(inst.recent) {
		inst.nrecent++
	}
	copy(inst.recent[1:inst.nrecent], inst.recent[:inst.nrecent-1])
	inst.recent[0] = r
	return r
}

func (p *Policy) acquire(ctx context.Context) (*instance, error) {
	select {
	case p.sem <- struct{}{}: // a free call slot: the common case, no select
	default:
		select {
		case p.sem <- struct{}{}:
		case <-p.done:
			return nil, fmt.Errorf("%w: %q", ErrClosed, p.name)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if inst := p.hot.Swap(nil); inst != nil { // the instance used last: no lock
		if p.closed.Load() {
			p.hot.Store(inst) // for Close to collect
			<-p.sem
			return nil, fmt.Errorf("%w: %q", ErrClosed, p.name)
		}
		return inst, nil
	}
	p.mu.Lock()
	if p.closed.Load() {
		p.mu.Unlock()
		<-p.sem
		return nil, fmt.Errorf("%w: %q", ErrClosed, p.name)
	}
	if n := len(p.free); n > 0 {
		inst := p.free[n-1]
		p.free = p.free[:n-1]
		p.mu.Unlock()
		return inst, nil
	}
	p.mu.Unlock()
	inst, err := p.newInstance(ctx)
	if err != nil {
		<-p.sem
		return nil, err
	}
	return inst, nil
}

// release returns inst to the pool, or throws it away after any error.
func (p *Policy) release(inst *instance, healthy bool) {
	if healthy && p.hot.CompareAndSwap(nil, inst) {
		<-p.sem
		return
	}
	if healthy {
		p.mu.Lock()
		p.free = append(p.free, inst)
		p.mu.Unlock()
	} else {
		inst.close()
	}
	<-p.sem
}

// callError classifies a failed call, attaches the guest's output and logs it.
func (p *Policy) callError(ctx context.Context, inst *instance, err error) error {
	var exit *sys.ExitError
	timedOut := inst.dl.fired.Load() // inline mode: the stop flag made the guest trap
	if timedOut && inst.dl.canceled.Load() {
		return fmt.Errorf("policies: policy %q: call canceled: %w", p.name, ctx.Err())
	}
	if !timedOut && errors.As(err, &exit) {
		switch exit.ExitCode() {
		case sys.ExitCodeDeadlineExceeded:
			timedOut = true
		case sys.ExitCodeContextCanceled:
			if ctx.Err() != nil {
				return fmt.Errorf("policies: policy %q: call canceled: %w", p.name, ctx.Err())
			}
		}
	}
	var cf *callFailure
	switch {
	case timedOut:
		err = deadlineFailure(exportDecide, inst.dl.timeout, "Config.CallTimeout")
	case errors.Is(err, ErrInvalidDecision):
	case !errors.As(err, &cf):
		err = trapFailure(exportDecide, err)
		if c := p.rt.cfg.MemoryLimit; inst.mem.Size() > inst.memAtStart && uint64(inst.mem.Size())+wasmPageSize > c {
			err = fmt.Errorf("%w (guest memory reached its cap of %d MiB, Config.MemoryLimit)", err, c>>20)
		}
	}
	err = fmt.Errorf("policy %q (%s): %w%s", p.name, digest.Short(p.version), err, guestOutput(inst.out))
	p.rt.log.Warn("policy call failed", "policy", p.name, "version", p.version, "err", err)
	return err
}

// DecideSerial asks a serial policy for a decision on s, and validates it
// (ValidateSerial) before returning it. Errors: ErrKind, ErrInvalidSnapshot,
// ErrTrap, ErrTimeout, ErrInvalidDecision (a *ValidationError), ErrClosed.
// After any error from the guest its instance is thrown away.
func (p *Policy) DecideSerial(ctx context.Context, s *abi.SerialSnapshot) (abi.SerialDecision, error) {
	var d abi.SerialDecision
	err := p.DecideSerialInto(ctx, s, &d)
	return d, err
}

// DecideSerialInto is DecideSerial writing the decision into d and reusing
// the array of d.Actions when it is large enough: a caller that copies
// each decision elsewhere at once (the coordinator) decides without
// allocating. d is reset first. After an ErrInvalidDecision for a decision
// that decoded, d holds it (bounded, for reports); after any other error
// it is empty.
func (p *Policy) DecideSerialInto(ctx context.Context, s *abi.SerialSnapshot, d *abi.SerialDecision) error {
	d.Reset()
	if p.kind != abi.KindSerial {
		return fmt.Errorf("%w: policy %q is %s, not serial", ErrKind, p.name, p.kind)
	}
	inst, err := p.acquire(ctx)
	if err != nil {
		return err
	}
	v := &inst.v
	if probs := v.indexSerial(s); !probs.empty() {
		p.release(inst, true)
		return probs.err(true)
	}
	if err := ctx.Err(); err != nil {
		p.release(inst, true)
		return fmt.Errorf("policies: policy %q: call canceled: %w", p.name, err)
	}
	inst.out.Reset()
	var out []byte
	usable, err := inst.call(ctx, p.rt.cfg.CallTimeout, func(cctx context.Context) error {
		// encoded straight into the guest's input buffer, in the form of
		// its ABI version; abicodec.SerialSnapshotSize(s) from the ids'
		// length indexSerial summed
		var n int
		if p.abi >= 4 {
			n = abicodec.SerialSnapshot4Size(s)
		} else {
			n = abicodec.SerialSnapshotHeaderSize + (len(s.Active)+len(s.Waiting))*abicodec.RunSize + len(s.Group) + len(s.Policy) + v.idBytes
		}
		in, err := inst.inputBuf(cctx, n)
		if err != nil {
			return err
		}
		if p.abi >= 4 {
			abicodec.PutSerialSnapshot4(in, s)
		} else {
			abicodec.PutSerialSnapshot(in, s)
		}
		out, err = inst.decideIn(cctx, n)
		return err
	})
	if err != nil {
		err = p.callError(ctx, inst, err)
		p.release(inst, false)
		return err
	}
	if inst.decideFast(out, s, p.abi, d) {
		p.release(inst, usable)
		return nil
	}
	d.Reset()
	probs, err := inst.decideGeneral(out, s, p.abi, d)
	if err != nil {
		err = p.callError(ctx, inst, err)
		p.release(inst, false)
		return err
	}
	p.release(inst, usable)
	if !probs.empty() {
		err := probs.err(false)
		p.rt.log.Warn("policy returned an invalid decision", "policy", p.name, "version", p.version, "group", s.Group, "err", err)
		return fmt.Errorf("policy %q (%s): %w", p.name, digest.Short(p.version), err)
	}
	return nil
}

// decideGeneral takes any serial decision from the guest's bytes out to
// d: decode in place, resolve the runs (by index or id), validate, copy
// out. It returns the decision's problems (d then holds it, bounded, for
// reports), or an error for output it cannot decode at all (then the
// instance is thrown away).
//
// It reads the guest's bytes in place and allocates in proportion to the
// snapshot, never to what the guest claims: the action count is checked
// against the snapshot before decoding, ids and reasons are checked
// (length, membership) before anything is copied.
func (inst *instance) decideGeneral(out []byte, s *abi.SerialSnapshot, version uint32, d *abi.SerialDecision) (problems, error) {
	v := &inst.v
	if n, runs := serialActions(out), len(s.Active)+len(s.Waiting); n > uint64(runs)+2 {
		var probs problems
		probs.add("%d actions for a snapshot of %d runs (at most one action per run, one discard_below and one wake)", n, runs)
		return problems{}, probs.err(false)
	}
	var view abi.SerialDecision
	view.Actions = v.actions[:0]
	indexed, err := abicodec.DecodeSerialDecisionRefs(out, &view, &v.refs)
	if err != nil {
		return problems{}, fmt.Errorf("%w: undecodable output: %v", ErrInvalidDecision, err)
	}
	v.actions = view.Actions
	if v.indexed = indexed; indexed {
		v.resolveRefs(s, v.refs) // no id to hash: the guest named each run by its index
	} else {
		v.resolve(s, &view)
	}
	v.abi = version
	probs := v.checkSerial(s, &view)
	inst.copyOut(s, &view, probs.empty(), d)
	return probs, nil
}

// copyOut copies the decision view (aliasing guest memory) out into d
// (reusing its array when large enough): run ids become the snapshot's own
// strings, reasons are interned (a valid reason is at most MaxReasonLen
// bytes). A rejected decision (!valid) is copied for reports only,
// bounded: unknown ids and long reasons truncated.
func (inst *instance) copyOut(s *abi.SerialSnapshot, view *abi.SerialDecision, valid bool, d *abi.SerialDecision) {
	v := &inst.v
	if n := len(view.Actions); cap(d.Actions) >= n {
		d.Actions = d.Actions[:n]
	} else {
		d.Actions = make([]abi.Action, n)
	}
	for i := range view.Actions {
		a, da := &view.Actions[i], &d.Actions[i]
		da.Kind = a.Kind
		if j := v.idx[i]; j >= 0 {
			da.Run = v.run(s, int(j)).ID
		} else {
			da.Run = strings.Clone(a.Run[:min(len(a.Run), maxQuotedID)])
		}
		if valid {
			da.Reason = inst.intern(a.Reason)
		} else {
			da.Reason = strings.Clone(a.Reason[:min(len(a.Reason), MaxReasonLen)])
		}
	}
	d.Wake = view.Wake
	if d.Below = view.Below; d.Below != 0 {
		if valid {
			d.BelowReason = inst.intern(view.BelowReason)
		} else {
			d.BelowReason = strings.Clone(view.BelowReason[:min(len(view.BelowReason), MaxReasonLen)])
		}
	}
}

// serialActions is the action count a serial decision claims (0 if out is
// too short to say).
func serialActions(out []byte) uint64 {
	if len(out) < abicodec.SerialDecisionHeaderSize {
		return 0
	}
	return uint64(binary.LittleEndian.Uint32(out[4:8]))
}

// DecideReuse asks a slot-reuse policy which task slots of r to reuse, and
// validates the decision (validateReuse) before returning it.
func (p *Policy) DecideReuse(ctx context.Context, r *abi.ReuseRequest) (abi.ReuseDecision, error) {
	if p.kind != abi.KindSlotReuse {
		return abi.ReuseDecision{}, fmt.Errorf("%w: policy %q is %s, not slot-reuse", ErrKind, p.name, p.kind)
	}
	inst, out, usable, err := p.decideRecord(ctx, func(b []byte) []byte { return abicodec.AppendReuseRequest(b, r) })
	if err != nil {
		return abi.ReuseDecision{}, err
	}
	// As in DecideSerial: counts checked against the request, the reason's
	// length before it is copied.
	if n := reuseVerdicts(out); n > uint64(len(r.Slots)) {
		var probs problems
		probs.add("%d verdicts for %d task slots", n, len(r.Slots))
		err = p.callError(ctx, inst, probs.err(false))
		p.release(inst, false)
		return abi.ReuseDecision{}, err
	}
	var d abi.ReuseDecision
	if err := abicodec.DecodeReuseDecisionView(out, &d); err != nil {
		err = p.callError(ctx, inst, fmt.Errorf("%w: undecodable output: %v", ErrInvalidDecision, err))
		p.release(inst, false)
		return abi.ReuseDecision{}, err
	}
	verr := validateReuse(r, &d)
	d.Reason = strings.Clone(d.Reason[:min(len(d.Reason), MaxReasonLen)])
	d.Verdicts = slices.Clone(d.Verdicts)
	p.release(inst, usable)
	if verr != nil {
		p.rt.log.Warn("policy returned an invalid decision", "policy", p.name, "version", p.version, "group", r.Group, "run", r.Run.ID, "err", verr)
		return d, fmt.Errorf("policy %q (%s): %w", p.name, digest.Short(p.version), verr)
	}
	return d, nil
}

// decideRecord is one decide call of a slot-reuse or allocation policy:
// an instance, the input encoded by enc (appending to the instance's
// buffer), the call under the deadline. On success the caller owns inst
// (release it) and out aliases guest memory; on error the instance is
// already thrown away (or returned, when ctx ended before the call).
func (p *Policy) decideRecord(ctx context.Context, enc func([]byte) []byte) (inst *instance, out []byte, usable bool, err error) {
	inst, err = p.acquire(ctx)
	if err != nil {
		return nil, nil, false, err
	}
	if err := ctx.Err(); err != nil {
		p.release(inst, true)
		return nil, nil, false, fmt.Errorf("policies: policy %q: call canceled: %w", p.name, err)
	}
	inst.enc = enc(inst.enc[:0])
	inst.out.Reset()
	usable, err = inst.call(ctx, p.rt.cfg.CallTimeout, func(cctx context.Context) error {
		in, err := inst.inputBuf(cctx, len(inst.enc))
		if err != nil {
			return err
		}
		copy(in, inst.enc)
		out, err = inst.decideIn(cctx, len(inst.enc))
		return err
	})
	if err != nil {
		err = p.callError(ctx, inst, err)
		p.release(inst, false)
		return nil, nil, false, err
	}
	return inst, out, usable, nil
}

// reuseVerdicts is the verdict count a reuse decision claims (0 if out is
// too short to say).
func reuseVerdicts(out []byte) uint64 {
	if len(out) < abicodec.ReuseDecisionHeaderSize {
		return 0
	}
	return uint64(binary.LittleEndian.Uint32(out[16:20]))
}
