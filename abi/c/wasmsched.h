/*
 * wasmsched.h: the wasmsched plugin SDK for C (ABI version 4), header-only
 * and freestanding (no libc, no allocator, no imports).
 *
 * A plugin defines ONE of
 *
 *     #define WASMSCHED_SERIAL      then   void ws_decide_serial(const ws_snapshot *s, ws_decision *d);
 *     #define WASMSCHED_REUSE       then   void ws_decide_reuse(const ws_reuse_request *r, ws_reuse_decision *d);
 *     #define WASMSCHED_ALLOCATION  then   void ws_decide_allocation(const ws_alloc_snapshot *s, ws_alloc_decision *d);
 *
 * before including this header, in exactly one .c file; the SDK owns every
 * export (wasmsched_abi_version, wasmsched_kind, wasmsched_input,
 * wasmsched_decide). Readers are zero-copy views of the input buffer (valid
 * during the call only); the decision writer encodes in place. Build:
 *
 *     clang --target=wasm32-wasi -O2 -nostdlib -Wl,--no-entry -Wl,--strip-all \
 *           -Wl,--export-dynamic -I abi/c -o policy.wasm policy.c
 *
 * Then append the custom section "wasmsched_sdk" with the payload "c" (the
 * source language `policy inspect` shows): plugins/c/build.sh does both.
 *
 * The layout of every record is abi/ABI.md's; a malformed input makes
 * wasmsched_decide return the error code 1 (a string reference outside the
 * record reads as empty instead), and nothing reads out of bounds.
 */
#ifndef WASMSCHED_H
#define WASMSCHED_H

#include <stddef.h>
#include <stdint.h>

#if !defined(WASMSCHED_SERIAL) && !defined(WASMSCHED_REUSE) && !defined(WASMSCHED_ALLOCATION)
#error "define WASMSCHED_SERIAL, WASMSCHED_REUSE or WASMSCHED_ALLOCATION before including wasmsched.h"
#endif
#if defined(WASMSCHED_SERIAL) + defined(WASMSCHED_REUSE) + defined(WASMSCHED_ALLOCATION) > 1
#error "a plugin is one of WASMSCHED_SERIAL, WASMSCHED_REUSE and WASMSCHED_ALLOCATION"
#endif

#define WS_ABI_VERSION 6
#define WS_MAX_REASON 256

enum { WS_WAITING = 1, WS_LAUNCHED = 2, WS_RUNNING = 3, WS_STOPPING = 4 };
enum { WS_LAUNCH = 1, WS_DISCARD = 2, WS_STOP = 3, WS_DISCARD_BELOW = 4, WS_WAKE = 5 };
/* The bounds of a wake (ms from the decision) the host holds it to. */
#define WS_MIN_WAKE_INTERVAL 100
#define WS_MAX_WAKE_AHEAD (24 * 3600 * 1000)
enum { WS_REUSE = 1, WS_REALLOCATE = 2 };

/* A string view into the input (not NUL-terminated). */
typedef struct { const char *p; uint32_t n; } ws_str;

/* ---- little-endian reads (wasm is little-endian) ---- */
static inline uint32_t ws__u32(const uint8_t *p) { uint32_t v; __builtin_memcpy(&v, p, 4); return v; }
static inline uint64_t ws__u64(const uint8_t *p) { uint64_t v; __builtin_memcpy(&v, p, 8); return v; }

/* A run record of the input: 64 bytes in a serial snapshot (version 4),
 * 48 in a reuse request. */
typedef struct { const uint8_t *p; } ws_run;
static inline uint64_t ws_run_seq(ws_run r) { return ws__u64(r.p); }
static inline int64_t ws_run_submitted_at(ws_run r) { return (int64_t)ws__u64(r.p + 8); }
static inline int64_t ws_run_started_at(ws_run r) { return (int64_t)ws__u64(r.p + 16); }
static inline int32_t ws_run_priority(ws_run r) { return (int32_t)ws__u32(r.p + 24); }
static inline uint32_t ws_run_slots(ws_run r) { return ws__u32(r.p + 28); }
static inline uint8_t ws_run_state(ws_run r) { return r.p[40]; }

/* ---- serial snapshot (version 4: tag 5, 64-byte header and runs, then
 * the label table, the group's parameters and its recent launches) ---- */
typedef struct {
	const uint8_t *b; /* the record */
	uint32_t len;
	uint32_t n_active, n_waiting;
	uint32_t n_labels, n_params, n_launches;
	const uint8_t *labels, *params, *launches; /* the three tables */
} ws_snapshot;

/* A label or parameter: key and value views ({0, 0} when absent). */
typedef struct { ws_str key, value; } ws_label;

static inline ws_str ws__str(const uint8_t *rec, const uint8_t *field) {
	ws_str s = {(const char *)rec + ws__u32(field), ws__u32(field + 4)};
	return s;
}
static inline uint32_t ws_snap_max_active(const ws_snapshot *s) { uint32_t m = ws__u32(s->b + 4); return m ? m : 1; }
static inline int64_t ws_snap_now(const ws_snapshot *s) { return (int64_t)ws__u64(s->b + 8); }
static inline ws_str ws_snap_group(const ws_snapshot *s) { return ws__str(s->b, s->b + 16); }
static inline uint32_t ws_snap_n_active(const ws_snapshot *s) { return s->n_active; }
static inline uint32_t ws_snap_n_waiting(const ws_snapshot *s) { return s->n_waiting; }
/* The group's WAITING runs in all (>= n_waiting). */
static inline uint32_t ws_snap_waiting_total(const ws_snapshot *s) {
	uint32_t t = ws__u32(s->b + 40);
	return t > s->n_waiting ? t : s->n_waiting;
}
/* Truncated: the waiting list is a window (its oldest and newest runs). */
static inline int ws_snap_truncated(const ws_snapshot *s) { return ws_snap_waiting_total(s) > s->n_waiting; }
static inline ws_run ws_snap_active(const ws_snapshot *s, uint32_t i) { ws_run r = {s->b + 64 + 64 * i}; return r; }
static inline ws_run ws_snap_waiting(const ws_snapshot *s, uint32_t i) { ws_run r = {s->b + 64 + 64 * (s->n_active + i)}; return r; }
/* A run's id. Its reference is checked here, when read, rather than for
 * every run before the policy runs (most policies never read an id: they
 * name runs by index); one outside the record (the host never sends one)
 * reads as empty. */
static inline ws_str ws_run_id(const ws_snapshot *s, ws_run r) {
	uint64_t off = ws__u32(r.p + 32), n = ws__u32(r.p + 36);
	ws_str id = {(const char *)s->b, 0};
	if (off + n <= s->len) {
		id.p = (const char *)s->b + off;
		id.n = (uint32_t)n;
	}
	return id;
}

/* A string reference of the record b[0:len], checked: outside it reads as empty. */
static inline ws_str ws__viewb(const uint8_t *b, uint32_t len, const uint8_t *field) {
	uint64_t off = ws__u32(field), n = ws__u32(field + 4);
	ws_str v = {(const char *)b, 0};
	if (off + n <= len) {
		v.p = (const char *)b + off;
		v.n = (uint32_t)n;
	}
	return v;
}
static inline ws_str ws__view(const ws_snapshot *s, const uint8_t *field) { return ws__viewb(s->b, s->len, field); }
static inline int ws_str_eq(ws_str a, const char *z) {
	uint32_t i = 0;
	for (; z[i]; i++)
		if (i >= a.n || a.p[i] != z[i]) return 0;
	return i == a.n;
}
/* a and b hold the same bytes. */
static inline int ws_str_same(ws_str a, ws_str b) {
	if (a.n != b.n) return 0;
	for (uint32_t i = 0; i < a.n; i++)
		if (a.p[i] != b.p[i]) return 0;
	return 1;
}

/* Version 4 fields of a snapshot's run: when it became due (unix ms, 0 =
 * at once), its attempt of max_attempts, its labels (sorted by key). */
static inline int64_t ws_run_not_before(ws_run r) { return (int64_t)ws__u64(r.p + 48); }
static inline uint32_t ws_run_attempt(ws_run r) { return ws__u32(r.p + 56); }
static inline uint32_t ws_run_max_attempts(ws_run r) { return ws__u32(r.p + 60); }
static inline uint32_t ws_run_n_labels(ws_run r) { return (uint32_t)r.p[42] | (uint32_t)r.p[43] << 8; }
static inline ws_label ws__labelb(const uint8_t *b, uint32_t len, const uint8_t *table, uint64_t n, uint64_t i) {
	ws_label l = {{(const char *)b, 0}, {(const char *)b, 0}};
	if (i < n) {
		l.key = ws__viewb(b, len, table + 16 * i);
		l.value = ws__viewb(b, len, table + 16 * i + 8);
	}
	return l;
}
static inline ws_label ws__label(const ws_snapshot *s, const uint8_t *table, uint64_t n, uint64_t i) {
	return ws__labelb(s->b, s->len, table, n, i);
}
/* ws__find: the value of key among count entries of a label table (of n)
 * from first (1 and the value's view, or 0 and {0,0}). */
static inline int ws__find(const uint8_t *b, uint32_t len, const uint8_t *table, uint64_t n, uint64_t first, uint32_t count,
                           const char *key, ws_str *value) {
	for (uint32_t i = 0; i < count; i++) {
		ws_label l = ws__labelb(b, len, table, n, first + i);
		if (ws_str_eq(l.key, key)) { *value = l.value; return 1; }
	}
	value->p = 0; value->n = 0;
	return 0;
}
/* Label i of run r (i < ws_run_n_labels). */
static inline ws_label ws_run_label(const ws_snapshot *s, ws_run r, uint32_t i) {
	uint64_t first = ws__u32(r.p + 44);
	if (i >= ws_run_n_labels(r)) first = s->n_labels;
	return ws__label(s, s->labels, s->n_labels, first + i);
}
/* The value of label key of run r ({0,0} and 0 returned when it has none). */
static inline int ws_run_label_value(const ws_snapshot *s, ws_run r, const char *key, ws_str *value) {
	return ws__find(s->b, s->len, s->labels, s->n_labels, ws__u32(r.p + 44), ws_run_n_labels(r), key, value);
}
/* The group's policy parameter name (group set --param). */
static inline int ws_snap_param(const ws_snapshot *s, const char *name, ws_str *value) {
	return ws__find(s->b, s->len, s->params, s->n_params, 0, s->n_params, name, value);
}
/* v as a non-negative decimal integer (def when empty or not one). */
static inline uint64_t ws_str_u64(ws_str v, uint64_t def) {
	if (v.n == 0 || v.n > 19) return def;
	uint64_t x = 0;
	for (uint32_t i = 0; i < v.n; i++) {
		if (v.p[i] < '0' || v.p[i] > '9') return def;
		x = x * 10 + (uint64_t)(v.p[i] - '0');
	}
	return x;
}
/* A parameter as a non-negative integer (def when unset or not one). */
static inline uint64_t ws_snap_param_u64(const ws_snapshot *s, const char *name, uint64_t def) {
	ws_str v;
	if (!ws_snap_param(s, name, &v)) return def;
	return ws_str_u64(v, def);
}
/* The group's recent launches, oldest first: when (unix ms) and labels. */
static inline uint32_t ws_snap_n_launches(const ws_snapshot *s) { return s->n_launches; }
static inline int64_t ws_snap_launch_at(const ws_snapshot *s, uint32_t i) {
	return i < s->n_launches ? (int64_t)ws__u64(s->launches + 16 * i) : 0;
}
static inline uint32_t ws_snap_launch_n_labels(const ws_snapshot *s, uint32_t i) {
	return i < s->n_launches ? ws__u32(s->launches + 16 * i + 12) : 0;
}
static inline ws_label ws_snap_launch_label(const ws_snapshot *s, uint32_t i, uint32_t j) {
	uint64_t first = i < s->n_launches && j < ws_snap_launch_n_labels(s, i) ? ws__u32(s->launches + 16 * i + 8) + (uint64_t)j : s->n_labels;
	return ws__label(s, s->labels, s->n_labels, first);
}

/* ---- serial decision writer (tag 2) ----
 * Actions name their run by its index in the snapshot (the indexed form of
 * ABI version 3): a run is given as the ws_run the readers returned, and
 * no id is copied. */
typedef struct {
	uint8_t *b;              /* output record */
	const uint8_t *runs;     /* the snapshot's first run record */
	uint32_t n, max;         /* actions written, action slots reserved */
	uint32_t str;            /* end of the string area (offset) */
	int below;               /* a discard_below was written */
	int64_t wake;            /* the wake asked (0: none), written last */
	const char *why;         /* the last reason written, */
	uint32_t why_off, why_n; /* where it is and its length */
} ws_decision;

static inline void ws__put32(uint8_t *p, uint32_t v) { __builtin_memcpy(p, &v, 4); }
static inline void ws__put64(uint8_t *p, uint64_t v) { __builtin_memcpy(p, &v, 8); }

static inline uint32_t ws__strlen(const char *s) { uint32_t n = 0; while (s[n]) n++; return n; }

/* ws__add writes one action; ref is the run's index (kinds 1-3) or the seq
 * (discard_below). */
static inline void ws__add(ws_decision *d, uint32_t kind, uint64_t ref, const char *why) {
	if (d->n >= d->max) return; /* more actions than runs: the host would refuse it anyway */
	uint8_t *a = d->b + 16 + 20 * d->n;
	ws__put32(a, kind);
	ws__put64(a + 4, ref);
	/* a reason repeated from the previous action (the common case: a
	 * static string per kind) is written once and referenced again */
	if (why != d->why || !why) {
		uint32_t wn = why ? ws__strlen(why) : 0;
		if (wn > WS_MAX_REASON) wn = WS_MAX_REASON;
		if (wn) __builtin_memcpy(d->b + d->str, why, wn);
		d->why = why;
		d->why_off = d->str;
		d->why_n = wn;
		d->str += wn;
	}
	ws__put32(a + 12, d->why_off);
	ws__put32(a + 16, d->why_n);
	d->n++;
}
static inline uint32_t ws__index(const ws_decision *d, ws_run r) { return (uint32_t)(r.p - d->runs) / 64u; }
/* Launch or discard a WAITING run, stop a LAUNCHED or RUNNING one: r is a
 * run of this call's snapshot (ws_snap_active, ws_snap_waiting). */
static inline void ws_launch(ws_decision *d, ws_run r, const char *why) { ws__add(d, WS_LAUNCH, ws__index(d, r), why); }
static inline void ws_discard(ws_decision *d, ws_run r, const char *why) { ws__add(d, WS_DISCARD, ws__index(d, r), why); }
static inline void ws_stop(ws_decision *d, ws_run r, const char *why) { ws__add(d, WS_STOP, ws__index(d, r), why); }
/* Discard every WAITING run below seq that the other actions leave WAITING
 * (at most once per decision; seq <= the newest waiting seq + 1). */
static inline void ws_discard_below(ws_decision *d, uint64_t seq, const char *why) {
	if (d->below) return;
	d->below = 1;
	ws__add(d, WS_DISCARD_BELOW, seq, why);
}
/* Ask to be decided again at unix ms t (the earliest of several calls;
 * the host holds it to WS_MIN_WAKE_INTERVAL..WS_MAX_WAKE_AHEAD). */
static inline void ws_wake_at(ws_decision *d, int64_t t) {
	if (t != 0 && (d->wake == 0 || t < d->wake)) d->wake = t;
}

/* ---- reuse request (tag 3) and decision (tag 4) ---- */
typedef struct {
	const uint8_t *b;
	uint32_t len, n_slots;
} ws_reuse_request;
typedef struct { const uint8_t *p; } ws_slot;
static inline uint32_t ws_req_n_slots(const ws_reuse_request *r) { return r->n_slots; }
static inline ws_slot ws_req_slot(const ws_reuse_request *r, uint32_t i) { ws_slot s = {r->b + 80 + 32 * i}; return s; }
static inline ws_run ws_req_run(const ws_reuse_request *r) { ws_run x = {r->b + 32}; return x; }
static inline uint32_t ws_slot_task(ws_slot s) { return ws__u32(s.p); }
static inline uint32_t ws_slot_index(ws_slot s) { return ws__u32(s.p + 4); }
static inline int ws_slot_alive(ws_slot s) { return s.p[24] & 1; }
static inline int ws_slot_held(ws_slot s) { return (s.p[24] >> 1) & 1; }
static inline ws_str ws_slot_worker(const ws_reuse_request *r, ws_slot s) { return ws__str(r->b, s.p + 8); }

typedef struct {
	uint8_t *b;
	uint32_t n, max;
	int fail;
	const char *reason;
} ws_reuse_decision;
static inline void ws_verdict(ws_reuse_decision *d, uint8_t v) { if (d->n < d->max) d->b[24 + d->n++] = v; }
static inline void ws_fail(ws_reuse_decision *d, const char *why) { d->fail = 1; d->reason = why; }

/* ws__strok: the string reference at field lies inside the record. */
static inline int ws__strok(const uint8_t *field, uint32_t len) {
	uint64_t off = ws__u32(field), n = ws__u32(field + 4);
	return off + n <= len;
}

/* ---- allocation snapshot (tag 6) and decision (tag 7) ----
 * The LAUNCHED runs waiting for slots, the live workers, the slots in use
 * per group and per label value, and the namespace's parameters; the
 * decision is the order (run indices) in which the runs get slots. */
typedef struct {
	const uint8_t *b; /* the record */
	uint32_t len;
	uint32_t n_runs, n_workers, n_usage, n_labels, n_params;
	const uint8_t *workers, *usage, *labels, *params; /* the tables after the runs */
	const uint8_t *profiles;                           /* version 5: the workers' labels and groups */
	const uint8_t *prefs;                              /* version 6: n_prefer, reserved, the preferences */
} ws_alloc_snapshot;

/* A run waiting for slots (48 bytes of the input). */
typedef struct { const uint8_t *p; } ws_alloc_run;
/* A live worker: its identity, the slots it registered, how many are free. */
typedef struct { ws_str worker; uint32_t slots, free; } ws_alloc_worker;
/* What one group (key empty, value the group) or one label value (key the
 * label) holds now: slots in use over runs RUNNING or STOPPING. */
typedef struct { ws_str key, value; uint32_t slots, runs; } ws_alloc_usage;

static inline int64_t ws_alloc_now(const ws_alloc_snapshot *s) { return (int64_t)ws__u64(s->b + 8); }
/* Free slots on live workers, and all of their slots. */
static inline uint32_t ws_alloc_free(const ws_alloc_snapshot *s) { return ws__u32(s->b + 16); }
static inline uint32_t ws_alloc_total(const ws_alloc_snapshot *s) { return ws__u32(s->b + 20); }
/* The runs waiting for slots in all (>= n_runs): more than n_runs makes
 * the runs a window, the first ws_alloc_oldest of them the queue's oldest,
 * the rest its newest. */
static inline uint32_t ws_alloc_launched_total(const ws_alloc_snapshot *s) {
	uint32_t t = ws__u32(s->b + 24);
	return t > s->n_runs ? t : s->n_runs;
}
static inline uint32_t ws_alloc_oldest(const ws_alloc_snapshot *s) {
	uint32_t o = ws__u32(s->b + 28);
	return o < s->n_runs ? o : s->n_runs;
}
static inline uint32_t ws_alloc_n_runs(const ws_alloc_snapshot *s) { return s->n_runs; }
/* Run i (i < n_runs), seq ascending within each part of the window. */
static inline ws_alloc_run ws_alloc_run_at(const ws_alloc_snapshot *s, uint32_t i) { ws_alloc_run r = {s->b + 48 + 48 * i}; return r; }
static inline uint64_t ws_arun_seq(ws_alloc_run r) { return ws__u64(r.p); }
static inline int64_t ws_arun_launched_at(ws_alloc_run r) { return (int64_t)ws__u64(r.p + 8); }
static inline int32_t ws_arun_priority(ws_alloc_run r) { return (int32_t)ws__u32(r.p + 16); }
/* The slots it needs, all at once (0 in the record reads as 1). */
static inline uint32_t ws_arun_slots(ws_alloc_run r) { uint32_t n = ws__u32(r.p + 20); return n ? n : 1; }
/* Its id and group (checked when read: outside the record reads as empty). */
static inline ws_str ws_arun_id(const ws_alloc_snapshot *s, ws_alloc_run r) { return ws__viewb(s->b, s->len, r.p + 24); }
static inline ws_str ws_arun_group(const ws_alloc_snapshot *s, ws_alloc_run r) { return ws__viewb(s->b, s->len, r.p + 32); }
static inline uint32_t ws_arun_n_labels(ws_alloc_run r) { return (uint32_t)r.p[44] | (uint32_t)r.p[45] << 8; }
/* Label i of run r (i < ws_arun_n_labels), sorted by key. */
static inline ws_label ws_arun_label(const ws_alloc_snapshot *s, ws_alloc_run r, uint32_t i) {
	uint64_t first = ws__u32(r.p + 40);
	if (i >= ws_arun_n_labels(r)) first = s->n_labels;
	return ws__labelb(s->b, s->len, s->labels, s->n_labels, first + i);
}
/* The value of label key of run r (0 and {0,0} when it has none). */
static inline int ws_arun_label_value(const ws_alloc_snapshot *s, ws_alloc_run r, const char *key, ws_str *value) {
	return ws__find(s->b, s->len, s->labels, s->n_labels, ws__u32(r.p + 40), ws_arun_n_labels(r), key, value);
}
/* Placement (ABI version 5): what a worker must carry to take run r (its
 * group's requirements and its own, sorted by key). */
static inline uint32_t ws_arun_n_require(ws_alloc_run r) { return (uint32_t)r.p[46] | (uint32_t)r.p[47] << 8; }
static inline ws_label ws_arun_require(const ws_alloc_snapshot *s, ws_alloc_run r, uint32_t i) {
	uint64_t first = (uint64_t)ws__u32(r.p + 40) + ws_arun_n_labels(r);
	if (i >= ws_arun_n_require(r)) first = s->n_labels;
	return ws__labelb(s->b, s->len, s->labels, s->n_labels, first + i);
}
static inline uint32_t ws_alloc_n_workers(const ws_alloc_snapshot *s) { return s->n_workers; }
/* Live worker i (by identity; an i past the table reads as empty). */
static inline ws_alloc_worker ws_alloc_worker_at(const ws_alloc_snapshot *s, uint32_t i) {
	ws_alloc_worker w = {{(const char *)s->b, 0}, 0, 0};
	if (i < s->n_workers) {
		const uint8_t *p = s->workers + 16 * i;
		w.worker = ws__viewb(s->b, s->len, p);
		w.slots = ws__u32(p + 8);
		w.free = ws__u32(p + 12);
	}
	return w;
}
static inline uint32_t ws_alloc_n_usage(const ws_alloc_snapshot *s) { return s->n_usage; }
/* Usage entry i: the groups first, then the label values, each part most
 * slots first (an i past the table reads as empty). */
static inline ws_alloc_usage ws_alloc_usage_at(const ws_alloc_snapshot *s, uint32_t i) {
	ws_alloc_usage u = {{(const char *)s->b, 0}, {(const char *)s->b, 0}, 0, 0};
	if (i < s->n_usage) {
		const uint8_t *p = s->usage + 24 * i;
		u.key = ws__viewb(s->b, s->len, p);
		u.value = ws__viewb(s->b, s->len, p + 8);
		u.slots = ws__u32(p + 16);
		u.runs = ws__u32(p + 20);
	}
	return u;
}
/* The slots a group (label "", value the group) or a label value holds now (0 when none). */
static inline uint32_t ws_alloc_used(const ws_alloc_snapshot *s, const char *label, ws_str value) {
	for (uint32_t i = 0; i < s->n_usage; i++) {
		ws_alloc_usage u = ws_alloc_usage_at(s, i);
		if (ws_str_eq(u.key, label) && ws_str_same(u.value, value)) return u.slots;
	}
	return 0;
}
/* The namespace's allocation parameter name (namespace set --param,
 * --fair-label, --weights), sorted by name. */
static inline int ws_alloc_param(const ws_alloc_snapshot *s, const char *name, ws_str *value) {
	return ws__find(s->b, s->len, s->params, s->n_params, 0, s->n_params, name, value);
}
static inline uint64_t ws_alloc_param_u64(const ws_alloc_snapshot *s, const char *name, uint64_t def) {
	ws_str v;
	if (!ws_alloc_param(s, name, &v)) return def;
	return ws_str_u64(v, def);
}

/* Placement (ABI version 5): worker i's labels (sorted by key) and the
 * groups it serves (names or patterns with '*', comma-separated; empty:
 * every group). */
static inline uint32_t ws_alloc_worker_n_labels(const ws_alloc_snapshot *s, uint32_t i) {
	return i < s->n_workers ? (uint32_t)s->profiles[16 * i + 4] | (uint32_t)s->profiles[16 * i + 5] << 8 : 0;
}
static inline int ws_alloc_worker_label_value(const ws_alloc_snapshot *s, uint32_t i, const char *key, ws_str *value) {
	if (i >= s->n_workers) return 0;
	return ws__find(s->b, s->len, s->labels, s->n_labels, ws__u32(s->profiles + 16 * i), ws_alloc_worker_n_labels(s, i), key, value);
}
static inline ws_str ws_alloc_worker_groups(const ws_alloc_snapshot *s, uint32_t i) {
	ws_str none = {(const char *)s->b, 0};
	return i < s->n_workers ? ws__viewb(s->b, s->len, s->profiles + 16 * i + 8) : none;
}
/* ws__glob: whether g matches pattern p ('*' matches any text). */
static inline int ws__glob(const char *p, uint32_t pn, const char *g, uint32_t gn) {
	uint32_t pi = 0, gi = 0, star = pn, mark = 0;
	while (gi < gn) {
		if (pi < pn && p[pi] == '*') { star = pi++; mark = gi; }
		else if (pi < pn && p[pi] == g[gi]) { pi++; gi++; }
		else if (star < pn) { pi = star + 1; gi = ++mark; }
		else return 0;
	}
	while (pi < pn && p[pi] == '*') pi++;
	return pi == pn;
}
/* Whether worker i serves group g. */
static inline int ws_alloc_worker_serves(const ws_alloc_snapshot *s, uint32_t i, ws_str g) {
	ws_str gs = ws_alloc_worker_groups(s, i);
	if (gs.n == 0) return i < s->n_workers;
	for (uint32_t a = 0; a < gs.n;) {
		uint32_t e = a;
		while (e < gs.n && gs.p[e] != ',') e++;
		if (ws__glob(gs.p + a, e - a, g.p, g.n)) return 1;
		a = e + 1;
	}
	return 0;
}
/* Preferences (ABI version 6): labels run r would rather its worker
 * carried, each with a weight (1 to 1000): soft, unlike requirements. The
 * table holds every run's, runs ascending; entry k names its run by index. */
typedef struct { uint32_t run, weight; ws_str key, value; } ws_alloc_pref;
static inline uint32_t ws_alloc_n_prefer(const ws_alloc_snapshot *s) { return ws__u32(s->prefs); }
static inline ws_alloc_pref ws_alloc_prefer_at(const ws_alloc_snapshot *s, uint32_t k) {
	ws_alloc_pref q = {0xFFFFFFFFu, 0, {(const char *)s->b, 0}, {(const char *)s->b, 0}};
	if (k < ws_alloc_n_prefer(s)) {
		const uint8_t *p = s->prefs + 8 + 24 * k;
		q.run = ws__u32(p);
		q.weight = ws__u32(p + 4);
		q.key = ws__viewb(s->b, s->len, p + 8);
		q.value = ws__viewb(s->b, s->len, p + 16);
	}
	return q;
}
/* Worker i's score for run r: the sum of the weights of r's preferences it
 * carries (0: none, or r has none). */
static inline uint32_t ws_alloc_score(const ws_alloc_snapshot *s, ws_alloc_run r, uint32_t i) {
	uint32_t run = (uint32_t)((r.p - s->b - 48) / 48), n = ws_alloc_n_prefer(s), score = 0;
	if (i >= s->n_workers) return 0;
	uint32_t first = ws__u32(s->profiles + 16 * i), nl = ws_alloc_worker_n_labels(s, i);
	for (uint32_t k = 0; k < n; k++) {
		ws_alloc_pref q = ws_alloc_prefer_at(s, k);
		if (q.run != run) {
			if (q.run > run) break;
			continue;
		}
		for (uint32_t j = 0; j < nl; j++) {
			ws_label l = ws__labelb(s->b, s->len, s->labels, s->n_labels, (uint64_t)first + j);
			if (ws_str_same(l.key, q.key)) {
				if (ws_str_same(l.value, q.value)) score += q.weight;
				break;
			}
		}
	}
	return score;
}
/* Whether worker i may take run r: it serves r's group and carries every
 * label r requires (its free slots aside). */
static inline int ws_alloc_worker_takes(const ws_alloc_snapshot *s, uint32_t i, ws_alloc_run r) {
	if (!ws_alloc_worker_serves(s, i, ws_arun_group(s, r))) return 0;
	uint32_t first = ws__u32(s->profiles + 16 * i), n = ws_alloc_worker_n_labels(s, i);
	for (uint32_t j = 0; j < ws_arun_n_require(r); j++) {
		ws_label q = ws_arun_require(s, r, j);
		int ok = 0;
		for (uint32_t k = 0; k < n && !ok; k++) {
			ws_label l = ws__labelb(s->b, s->len, s->labels, s->n_labels, (uint64_t)first + k);
			ok = ws_str_same(l.key, q.key) && ws_str_same(l.value, q.value);
		}
		if (!ok) return 0;
	}
	return 1;
}

/* ---- allocation decision writer (tag 7): the order, in place ---- */
typedef struct {
	uint8_t *b;      /* output record */
	uint32_t n, max; /* indices written, the snapshot's runs */
	int placed;      /* a worker was named (ws_place) */
} ws_alloc_decision;
/* WS_HOST_CHOOSES: ws_place leaves the run's worker to the host. */
#define WS_HOST_CHOOSES 0xFFFFFFFFu
/* Run i of the snapshot gets slots next, on worker w (an index into the
 * snapshot's workers: all of its slots there; ABI version 5), or
 * WS_HOST_CHOOSES. An index past the runs is dropped; a run written twice,
 * or a worker that may not take it or has too few free slots for the runs
 * named on it, makes the host refuse the whole decision. */
static inline void ws_place(ws_alloc_decision *d, uint32_t i, uint32_t w) {
	if (i >= d->max || d->n >= d->max) return;
	ws__put32(d->b + 16 + 4 * d->n, i);
	ws__put32(d->b + 16 + 4 * d->max + 4 * d->n, w); /* moved after the order at the end */
	d->placed |= w != WS_HOST_CHOOSES;
	d->n++;
}
/* Run i of the snapshot gets slots next (the host chooses the worker). */
static inline void ws_order(ws_alloc_decision *d, uint32_t i) { ws_place(d, i, WS_HOST_CHOOSES); }
static inline uint32_t ws_order_len(const ws_alloc_decision *d) { return d->n; }
/* The k-th index written (k < ws_order_len). */
static inline uint32_t ws_order_at(const ws_alloc_decision *d, uint32_t k) { return k < d->n ? ws__u32(d->b + 16 + 4 * k) : 0; }

/* ws__swap swaps entries a and b of the order, with their workers. */
static inline void ws__swap(ws_alloc_decision *d, uint32_t a, uint32_t b) {
	uint8_t *o = d->b + 16, *w = d->b + 16 + 4 * d->max;
	uint32_t x = ws__u32(o + 4 * a), y = ws__u32(o + 4 * b);
	ws__put32(o + 4 * a, y);
	ws__put32(o + 4 * b, x);
	x = ws__u32(w + 4 * a), y = ws__u32(w + 4 * b);
	ws__put32(w + 4 * a, y);
	ws__put32(w + 4 * b, x);
}
/* ws_order_sort sorts the order written so far so that run a comes before
 * run b when before(s, a, b): a heap sort, in place, O(n log n), not
 * stable (break ties, by seq for one); a run's worker (ws_place) moves
 * with it. */
static inline void ws__sift(ws_alloc_decision *d, const ws_alloc_snapshot *s,
                            int (*before)(const ws_alloc_snapshot *, ws_alloc_run, ws_alloc_run), uint32_t at, uint32_t n) {
	uint8_t *o = d->b + 16;
	for (;;) {
		uint32_t c = 2 * at + 1;
		if (c >= n) return;
		/* a max-heap of "comes last": the child that comes later */
		if (c + 1 < n && before(s, ws_alloc_run_at(s, ws__u32(o + 4 * c)), ws_alloc_run_at(s, ws__u32(o + 4 * (c + 1))))) c++;
		uint32_t x = ws__u32(o + 4 * at), y = ws__u32(o + 4 * c);
		if (!before(s, ws_alloc_run_at(s, x), ws_alloc_run_at(s, y))) return;
		ws__swap(d, at, c);
		at = c;
	}
}
static inline void ws_order_sort(ws_alloc_decision *d, const ws_alloc_snapshot *s,
                                 int (*before)(const ws_alloc_snapshot *, ws_alloc_run, ws_alloc_run)) {
	uint32_t n = d->n;
	for (uint32_t i = n / 2; i > 0; i--) ws__sift(d, s, before, i - 1, n);
	while (n > 1) {
		n--;
		ws__swap(d, 0, n);
		ws__sift(d, s, before, 0, n);
	}
}

#ifdef WASMSCHED_SERIAL
/* Declared static and always inlined: the policy is compiled into the
 * export, so the decision writer's state stays in locals (wasm registers)
 * instead of memory. The plugin's definition needs no `static`. */
static inline __attribute__((always_inline)) void ws_decide_serial(const ws_snapshot *s, ws_decision *d);

/* ws_serial_out_size: the output room a decision of the snapshot b[0:n]
 * needs (one action per run plus a discard_below, each with a full
 * reason), 0 if b is not a valid snapshot (tag, counts, the group and
 * policy strings; run ids are checked when read, ws_run_id). */
static inline uint64_t ws_serial_out_size(const uint8_t *b, uint32_t n) {
	if (n < 64 || ws__u32(b) != 5) return 0;
	uint64_t na = ws__u32(b + 32), nw = ws__u32(b + 36);
	uint64_t nl = ws__u32(b + 48), np = ws__u32(b + 52), nh = ws__u32(b + 56);
	if (64 + 64 * (na + nw) + 16 * (nl + np + nh) > n) return 0;
	if (!ws__strok(b + 16, n) || !ws__strok(b + 24, n)) return 0;
	uint64_t max = na + nw + 2;
	return 16 + 20 * max + (uint64_t)WS_MAX_REASON * max;
}

/* ws_decide_serial_buf decides the valid snapshot b[0:n] into out (at
 * least ws_serial_out_size bytes) and returns the decision's length: what
 * the export runs, and what native tests call. */
static inline uint32_t ws_decide_serial_buf(const uint8_t *b, uint32_t n, uint8_t *out) {
	uint32_t na = ws__u32(b + 32), nw = ws__u32(b + 36);
	uint32_t nl = ws__u32(b + 48), np = ws__u32(b + 52), nh = ws__u32(b + 56);
	const uint8_t *labels = b + 64 + 64 * (na + nw);
	ws_snapshot s = {b, n, na, nw, nl, np, nh, labels, labels + 16 * nl, labels + 16 * (nl + np)};
	uint32_t max = na + nw + 1; /* one more slot for a wake */
	ws_decision d = {out, b + 64, 0, max, 16 + 20 * (max + 1), 0, 0, 0, 0, 0};
	ws_decide_serial(&s, &d);
	if (d.wake) { /* the last action: kind 5, its time where a reference goes */
		uint8_t *a = d.b + 16 + 20 * d.n;
		ws__put32(a, WS_WAKE);
		ws__put64(a + 4, (uint64_t)d.wake);
		ws__put64(a + 12, 0);
		d.n++;
	}
	/* the string area stays after the max slots reserved: the slots not
	 * written are a gap the host never reads (strings are located by
	 * offset, ABI.md), cheaper than moving the strings down */
	ws__put32(d.b, 2);
	ws__put32(d.b + 4, d.n);
	ws__put64(d.b + 8, 1); /* flags: DecisionRunIndex */
	return d.str;
}
#elif defined(WASMSCHED_REUSE)
static inline __attribute__((always_inline)) void ws_decide_reuse(const ws_reuse_request *r, ws_reuse_decision *d);

/* ws_reuse_out_size: the output room a decision of the request b[0:n]
 * needs, 0 if b is not a valid reuse request. */
static inline uint64_t ws_reuse_out_size(const uint8_t *b, uint32_t n) {
	if (n < 80 || ws__u32(b) != 3) return 0;
	uint64_t ns = ws__u32(b + 4);
	if (80 + 32 * ns > n) return 0;
	if (!ws__strok(b + 16, n) || !ws__strok(b + 64, n)) return 0;
	for (uint64_t i = 0; i < ns; i++) {
		const uint8_t *sl = b + 80 + 32 * i;
		if (!ws__strok(sl + 8, n) || !ws__strok(sl + 16, n)) return 0;
	}
	return 24 + ns + WS_MAX_REASON;
}

/* ws_decide_reuse_buf decides the valid request b[0:n] into out. */
static inline uint32_t ws_decide_reuse_buf(const uint8_t *b, uint32_t n, uint8_t *out) {
	ws_reuse_request r = {b, n, ws__u32(b + 4)};
	ws_reuse_decision d = {out, 0, r.n_slots, 0, 0};
	ws_decide_reuse(&r, &d);
	uint32_t end = 24 + d.n, rn = 0;
	if (d.reason) {
		rn = ws__strlen(d.reason);
		if (rn > WS_MAX_REASON) rn = WS_MAX_REASON;
		__builtin_memcpy(d.b + end, d.reason, rn);
	}
	ws__put32(d.b, 4);
	ws__put32(d.b + 4, d.fail ? 1 : 0);
	ws__put32(d.b + 8, rn ? end : 0);
	ws__put32(d.b + 12, rn);
	ws__put32(d.b + 16, d.fail ? 0 : d.n);
	ws__put32(d.b + 20, 0);
	return end + rn;
}
#else
static inline __attribute__((always_inline)) void ws_decide_allocation(const ws_alloc_snapshot *s, ws_alloc_decision *d);

/* ws_allocation_out_size: the output room a decision of the snapshot
 * b[0:n] needs (one index per run), 0 if b is not a valid allocation
 * snapshot (tag and counts; strings are checked when read). */
static inline uint64_t ws_allocation_out_size(const uint8_t *b, uint32_t n) {
	if (n < 48 || ws__u32(b) != 6) return 0;
	uint64_t nr = ws__u32(b + 4), nw = ws__u32(b + 32), nu = ws__u32(b + 36);
	uint64_t nl = ws__u32(b + 40), np = ws__u32(b + 44);
	uint64_t at = 48 + 48 * nr + 32 * nw + 24 * nu + 16 * (nl + np);
	if (at + 8 > n || at + 8 + 24 * (uint64_t)ws__u32(b + at) > n) return 0;
	return 16 + 8 * nr;
}

/* ws_decide_allocation_buf decides the valid snapshot b[0:n] into out (at
 * least ws_allocation_out_size bytes) and returns the decision's length. */
static inline uint32_t ws_decide_allocation_buf(const uint8_t *b, uint32_t n, uint8_t *out) {
	uint32_t nr = ws__u32(b + 4), nw = ws__u32(b + 32), nu = ws__u32(b + 36);
	uint32_t nl = ws__u32(b + 40), np = ws__u32(b + 44);
	const uint8_t *workers = b + 48 + 48 * nr, *usage = workers + 16 * nw, *labels = usage + 24 * nu;
	ws_alloc_snapshot s = {b, n, nr, nw, nu, nl, np, workers, usage, labels, labels + 16 * nl, labels + 16 * (nl + np),
		labels + 16 * (nl + np) + 16 * nw};
	ws_alloc_decision d = {out, 0, nr, 0};
	ws_decide_allocation(&s, &d);
	ws__put32(d.b, 7);
	ws__put32(d.b + 4, d.n);
	ws__put64(d.b + 8, 0);
	if (!d.placed) return 16 + 4 * d.n;
	/* the workers, written past the room of a full order, follow the order */
	ws__put32(d.b + 8, d.n);
	for (uint32_t k = 0; k < d.n; k++) ws__put32(d.b + 16 + 4 * d.n + 4 * k, ws__u32(d.b + 16 + 4 * d.max + 4 * k));
	return 16 + 8 * d.n;
}
#endif

#ifdef __wasm__
/* ---- the exports (wasm builds only: a native build is a test harness) ----
 *
 * Buffers come from memory.grow, past everything the module has: an input
 * region and an output region, each grown (never shrunk) when a call needs
 * more. Nothing else allocates. */
static uint8_t *ws__in, *ws__out;
static uint32_t ws__in_cap, ws__out_cap;

static inline uint8_t *ws__grow(uint32_t size, uint32_t *cap) {
	uint32_t pages = (size + 65535u) / 65536u;
	if (pages == 0) pages = 1;
	int32_t old = (int32_t)__builtin_wasm_memory_grow(0, pages);
	if (old < 0) return 0;
	*cap = pages * 65536u;
	return (uint8_t *)((uintptr_t)old * 65536u);
}

__attribute__((export_name("wasmsched_abi_version"))) int32_t wasmsched_abi_version(void) { return WS_ABI_VERSION; }

#if defined(WASMSCHED_SERIAL)
__attribute__((export_name("wasmsched_kind"))) int32_t wasmsched_kind(void) { return 1; }
#elif defined(WASMSCHED_REUSE)
__attribute__((export_name("wasmsched_kind"))) int32_t wasmsched_kind(void) { return 2; }
#else
__attribute__((export_name("wasmsched_kind"))) int32_t wasmsched_kind(void) { return 3; }
#endif

__attribute__((export_name("wasmsched_input"))) uint8_t *wasmsched_input(int32_t size) {
	if (size < 0 || size > (64 << 20)) return 0;
	if ((uint32_t)size > ws__in_cap || !ws__in) {
		uint8_t *p = ws__grow((uint32_t)size, &ws__in_cap);
		if (!p) return 0;
		ws__in = p;
	}
	return ws__in;
}

#define WS__FAIL ((int64_t)1) /* ptr 0, error code 1: malformed input */

__attribute__((export_name("wasmsched_decide"))) int64_t wasmsched_decide(int32_t len) {
	if (!ws__in || len < 8 || (uint32_t)len > ws__in_cap) return WS__FAIL;
	uint32_t n = (uint32_t)len;
#if defined(WASMSCHED_SERIAL)
	uint64_t need = ws_serial_out_size(ws__in, n);
#elif defined(WASMSCHED_REUSE)
	uint64_t need = ws_reuse_out_size(ws__in, n);
#else
	uint64_t need = ws_allocation_out_size(ws__in, n);
#endif
	if (need == 0 || need > ((uint64_t)64 << 20)) return WS__FAIL;
	if (need > ws__out_cap || !ws__out) {
		uint8_t *p = ws__grow((uint32_t)need, &ws__out_cap);
		if (!p) return WS__FAIL;
		ws__out = p;
	}
#if defined(WASMSCHED_SERIAL)
	uint32_t m = ws_decide_serial_buf(ws__in, n, ws__out);
#elif defined(WASMSCHED_REUSE)
	uint32_t m = ws_decide_reuse_buf(ws__in, n, ws__out);
#else
	uint32_t m = ws_decide_allocation_buf(ws__in, n, ws__out);
#endif
	return (int64_t)(((uint64_t)(uintptr_t)ws__out << 32) | m);
}
#endif /* __wasm__ */

#endif /* WASMSCHED_H */
