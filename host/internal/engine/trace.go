package engine

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/wasmsched/wasmsched/internal/tracing"
	"github.com/wasmsched/wasmsched/storage"
)

// decisionSpansBuffer bounds the decisions waiting for their spans: past
// it (the span writer fell behind, Redis slow) a decision's spans are
// dropped and counted (the "trace.dropped" counter of /status), never the
// decision held up.
const decisionSpansBuffer = 4096

// decisionSpansRead bounds the runs whose trace contexts one pipelined
// read asks for.
const decisionSpansRead = 1024

// decidedSpan is what the span writer keeps of an applied decision.
type decidedSpan struct {
	group      string
	d          storage.Decision
	epoch      int64
	start, end time.Time
}

// decisionSpans writes one "wasmsched.decide" span per run an applied
// decision acted on (launch, discard, stop), a child of the run's submit
// span, off the decision path: the coordinator hands it the decision
// (add never blocks) and a goroutine reads the runs' trace contexts in
// one pipelined round trip a batch (storage.Store.TraceParents) and ends
// the spans with the decision's times. A run submitted without a trace
// context gets none. It exists only with Config.TracerProvider: tracing
// off, the coordinator adds nothing.
type decisionSpans struct {
	st    *storage.Store
	tr    trace.Tracer
	log   *slog.Logger
	ch    chan decidedSpan
	stop  chan struct{}
	wg    sync.WaitGroup
	count func(key string, n int) // the engine's /status counters: trace.spans, trace.dropped
	ns    attribute.KeyValue      // wasmsched.namespace
}

func newDecisionSpans(st *storage.Store, tp trace.TracerProvider, log *slog.Logger, count func(string, int)) *decisionSpans {
	s := &decisionSpans{st: st, tr: tracing.Tracer(tp), log: log, ch: make(chan decidedSpan, decisionSpansBuffer),
		stop: make(chan struct{}), count: count, ns: attribute.String("wasmsched.namespace", st.Namespace())}
	s.wg.Add(1)
	go s.loop()
	return s
}

// add queues an applied decision's spans (nil s: tracing off).
func (s *decisionSpans) add(group string, d storage.Decision, epoch int64, start, end time.Time) {
	if s == nil || len(d.Actions) == 0 {
		return
	}
	select {
	case s.ch <- decidedSpan{group: group, d: d, epoch: epoch, start: start, end: end}:
	default:
		s.count("trace.dropped", len(d.Actions))
	}
}

// close writes what is queued and stops.
func (s *decisionSpans) close() {
	if s == nil {
		return
	}
	close(s.stop)
	s.wg.Wait()
}

func (s *decisionSpans) loop() {
	defer s.wg.Done()
	batch := make([]decidedSpan, 0, 64)
	for {
		batch = batch[:0]
		select {
		case d := <-s.ch:
			batch = append(batch, d)
		case <-s.stop:
			s.drain(batch)
			return
		}
		n := len(batch[0].d.Actions)
	more:
		for n < decisionSpansRead {
			select {
			case d := <-s.ch:
				batch = append(batch, d)
				n += len(d.d.Actions)
			default:
				break more
			}
		}
		s.write(batch)
	}
}

// drain writes what is left in the queue at close.
func (s *decisionSpans) drain(batch []decidedSpan) {
	for {
		select {
		case d := <-s.ch:
			batch = append(batch, d)
		default:
			s.write(batch)
			return
		}
	}
}

// write reads the trace contexts of batch's runs and ends their spans.
func (s *decisionSpans) write(batch []decidedSpan) {
	if len(batch) == 0 {
		return
	}
	var ids []string
	for _, b := range batch {
		for _, a := range b.d.Actions {
			ids = append(ids, a.Run)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	tps, err := s.st.TraceParents(ctx, ids)
	cancel()
	if err != nil {
		s.count("trace.dropped", len(ids))
		s.log.Debug("decision spans dropped: trace contexts not read", "runs", len(ids), "err", err)
		return
	}
	i := 0
	for _, b := range batch {
		for _, a := range b.d.Actions {
			tp := tps[i]
			i++
			if tp == "" {
				continue
			}
			s.span(b, a, tp)
		}
	}
}

// span ends one run's decision span: the policy's name and version, the
// decision's reason and id (epoch:group:version) and wake, few attributes
// (each costs the SDK a map entry at End and the exporter an encoding).
func (s *decisionSpans) span(b decidedSpan, a storage.Action, tp string) {
	d := b.d
	attrs := make([]attribute.KeyValue, 0, 9)
	attrs = append(attrs, s.ns, attribute.String("wasmsched.group", b.group),
		attribute.String("wasmsched.run", a.Run), attribute.String("wasmsched.action", string(a.Kind)),
		attribute.String("wasmsched.reason", a.Reason), attribute.String("wasmsched.policy", d.Policy),
		attribute.String("wasmsched.policy.version", d.PolicyVersion), attribute.String("wasmsched.decision", d.ClaimID))
	if d.WakeAt > 0 {
		attrs = append(attrs, attribute.String("wasmsched.wake_at", time.UnixMilli(d.WakeAt).UTC().Format(time.RFC3339Nano)))
	}
	_, sp := s.tr.Start(tracing.ContextWith(context.Background(), tp), tracing.SpanDecide,
		trace.WithTimestamp(b.start), trace.WithAttributes(attrs...))
	sp.End(trace.WithTimestamp(b.end))
	s.count("trace.spans", 1)
}
