package storage

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Connection modes (ParseRedisURL).
const (
	modeSingle   = "single"
	modeCluster  = "cluster"
	modeSentinel = "sentinel"
)

// RedisTarget is a parsed --redis value: exactly one of Single, Cluster,
// Failover is set, matching Mode.
type RedisTarget struct {
	Mode     string
	Single   *redis.Options
	Cluster  *redis.ClusterOptions
	Failover *redis.FailoverOptions
	// Durability is the URL's durable= / durable_timeout= (any form);
	// DurableSet reports whether the URL gave either.
	Durability Durability
	DurableSet bool
}

// Addrs lists the addresses the target names (node, seeds or sentinels).
func (t RedisTarget) Addrs() []string {
	switch {
	case t.Single != nil:
		return []string{t.Single.Addr}
	case t.Cluster != nil:
		return t.Cluster.Addrs
	case t.Failover != nil:
		return t.Failover.SentinelAddrs
	}
	return nil
}

// NewClient builds the client for the target (it does not talk to Redis).
func (t RedisTarget) NewClient() redis.UniversalClient {
	switch {
	case t.Cluster != nil:
		return redis.NewClusterClient(t.Cluster)
	case t.Failover != nil:
		return redis.NewFailoverClient(t.Failover)
	default:
		return redis.NewClient(t.Single)
	}
}

// Connect parses a --redis value (ParseRedisURL), connects and PINGs. The
// forms are:
//
//	redis://[user:pass@]host:port[/db][?opts]      one node (rediss:// = TLS)
//	host:port                                      one node, no auth
//	redis://h1:p1,redis://h2:p2  or  h1:p1,h2:p2   Redis Cluster seeds
//	redis+cluster://[user:pass@]h1:p1[,h2:p2][?opts]   Redis Cluster (explicit;
//	                                               rediss+cluster:// = TLS)
//	redis+sentinel://[user:pass@]s1:p1[,s2:p2]/MASTER[/db][?db=N&sentinel_username=U&sentinel_password=P]
//	                                               Sentinel (also redis-sentinel://,
//	                                               rediss+sentinel:// = TLS)
//
// Every form also takes durable=auto|on|off and durable_timeout=D in its
// query (see Durability; default auto, 1s): a Store made with New on the
// returned client waits for replicas accordingly.
//
// user:pass authenticate against the data nodes (for Sentinel: the master
// and replicas; the sentinels' own credentials go in the query). A
// single-node URL that turns out to point at a cluster-enabled node (INFO
// cluster) is reconnected as a cluster client with that node as the seed.
// A malformed value returns an error wrapping ErrInvalid that names what is
// wrong; a Redis that does not answer returns an error naming the addresses.
func Connect(ctx context.Context, url string) (redis.UniversalClient, error) {
	t, err := ParseRedisURL(url)
	if err != nil {
		return nil, err
	}
	c := t.NewClient()
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("storage: connect: redis %s at %s: ping: %w", t.Mode, strings.Join(t.Addrs(), ","), err)
	}
	if t.Mode == modeSingle {
		// Detect cluster mode behind a single seed.
		info, err := c.Info(ctx, "cluster").Result()
		if err == nil && strings.Contains(info, "cluster_enabled:1") {
			_ = c.Close()
			o := t.Single
			cc := redis.NewClusterClient(&redis.ClusterOptions{
				Addrs: []string{o.Addr}, Username: o.Username, Password: o.Password, TLSConfig: o.TLSConfig,
				DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
				PoolSize: o.PoolSize, MaxRetries: o.MaxRetries, ClientName: o.ClientName, Protocol: o.Protocol,
			})
			if o.DB != 0 {
				_ = cc.Close()
				return nil, fmt.Errorf("storage: connect: %s is a Redis Cluster node: only db 0 exists there, got db %d: %w", o.Addr, o.DB, ErrInvalid)
			}
			if err := cc.Ping(ctx).Err(); err != nil {
				_ = cc.Close()
				return nil, fmt.Errorf("storage: connect: redis cluster at %s: ping: %w", o.Addr, err)
			}
			return t.wrap(cc), nil
		}
	}
	return t.wrap(c), nil
}

// wrap makes a client remember the URL's durability for New.
func (t RedisTarget) wrap(c redis.UniversalClient) redis.UniversalClient {
	if !t.DurableSet {
		return c
	}
	return &durableClient{UniversalClient: c, d: t.Durability}
}

// ParseRedisURL parses a --redis value (see Connect for the forms). Errors
// wrap ErrInvalid and name the offending part.
func ParseRedisURL(raw string) (RedisTarget, error) {
	s := strings.TrimSpace(raw)
	bad := func(format string, a ...any) (RedisTarget, error) {
		return RedisTarget{}, fmt.Errorf("storage: bad redis URL %q: %s: %w", raw, fmt.Sprintf(format, a...), ErrInvalid)
	}
	if s == "" {
		return bad("empty")
	}
	s, d, set, err := cutDurable(s)
	if err != nil {
		return bad("%v", err)
	}
	t, err := parseTarget(raw, s)
	if err != nil {
		return t, err
	}
	t.Durability, t.DurableSet = d.withDefaults(), set
	return t, nil
}

// parseTarget is ParseRedisURL once durable= is cut from s.
func parseTarget(raw, s string) (RedisTarget, error) {
	bad := func(format string, a ...any) (RedisTarget, error) {
		return RedisTarget{}, fmt.Errorf("storage: bad redis URL %q: %s: %w", raw, fmt.Sprintf(format, a...), ErrInvalid)
	}
	scheme, rest, hasScheme := strings.Cut(s, "://")
	if !hasScheme {
		scheme, rest = "", s
	}
	scheme = strings.ToLower(scheme)
	switch scheme {
	case "redis+sentinel", "rediss+sentinel", "redis-sentinel", "rediss-sentinel":
		return parseSentinel(raw, strings.HasPrefix(scheme, "rediss"), rest)
	case "redis+cluster", "rediss+cluster", "redis-cluster", "rediss-cluster":
		return parseCluster(raw, strings.HasPrefix(scheme, "rediss"), rest)
	case "redis", "rediss", "":
	default:
		return bad("unknown scheme %q (want redis, rediss, redis+cluster, rediss+cluster, redis+sentinel or rediss+sentinel)", scheme)
	}
	if strings.Contains(s, ",") {
		// A list of cluster seeds: "redis://h1:p1,redis://h2:p2" or "h1:p1,h2:p2".
		var seeds []*redis.Options
		for i, part := range strings.Split(s, ",") {
			part = strings.TrimSpace(part)
			if part == "" {
				return bad("seed %d is empty", i+1)
			}
			o, err := parseNode(part)
			if err != nil {
				return bad("seed %d %q: %v", i+1, part, err)
			}
			if o.DB != 0 {
				return bad("seed %d %q: Redis Cluster has only db 0", i+1, part)
			}
			seeds = append(seeds, o)
		}
		f := seeds[0]
		co := &redis.ClusterOptions{Username: f.Username, Password: f.Password, TLSConfig: f.TLSConfig,
			DialTimeout: f.DialTimeout, ReadTimeout: f.ReadTimeout, WriteTimeout: f.WriteTimeout,
			PoolSize: f.PoolSize, MaxRetries: f.MaxRetries, ClientName: f.ClientName, Protocol: f.Protocol}
		for _, o := range seeds {
			co.Addrs = append(co.Addrs, o.Addr)
		}
		return RedisTarget{Mode: modeCluster, Cluster: co}, nil
	}
	o, err := parseNode(s)
	if err != nil {
		return bad("%v", err)
	}
	return RedisTarget{Mode: modeSingle, Single: o}, nil
}

// parseNode parses one node: a redis:// / rediss:// URL or a bare host:port.
func parseNode(s string) (*redis.Options, error) {
	if !strings.Contains(s, "://") {
		if err := checkHostPort(s); err != nil {
			return nil, err
		}
		return &redis.Options{Addr: s}, nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, unwrapURLErr(err)
	}
	if u.Host == "" {
		return nil, errors.New("no host")
	}
	if p := u.Port(); p != "" {
		if _, err := strconv.ParseUint(p, 10, 16); err != nil {
			return nil, fmt.Errorf("port %q is not a number in 1..65535", p)
		}
	}
	o, err := redis.ParseURL(s)
	if err != nil {
		return nil, errors.New(strings.TrimPrefix(err.Error(), "redis: "))
	}
	return o, nil
}

func checkHostPort(hp string) error {
	h, p, err := net.SplitHostPort(hp)
	if err != nil {
		return fmt.Errorf("want host:port or a redis:// URL: %v", err)
	}
	if h == "" {
		return errors.New("empty host")
	}
	if n, err := strconv.ParseUint(p, 10, 16); err != nil || n == 0 {
		return fmt.Errorf("port %q is not a number in 1..65535", p)
	}
	return nil
}

func unwrapURLErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// splitHosts parses "[user:pass@]h1:p1[,h2:p2...]" + the path/query rest.
func splitHosts(rest string) (user, pass string, hasPass bool, hosts []string, path, query string, err error) {
	authority := rest
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		authority, path = rest[:i], rest[i:]
	}
	if i := strings.Index(path, "?"); i >= 0 {
		path, query = path[:i], path[i+1:]
	}
	if i := strings.LastIndex(authority, "@"); i >= 0 {
		ui := authority[:i]
		authority = authority[i+1:]
		u, p, ok := strings.Cut(ui, ":")
		if user, err = url.PathUnescape(u); err != nil {
			return
		}
		if ok {
			hasPass = true
			if pass, err = url.PathUnescape(p); err != nil {
				return
			}
		}
	}
	if authority == "" {
		err = errors.New("no host")
		return
	}
	for _, h := range strings.Split(authority, ",") {
		if h == "" {
			err = errors.New("empty address in the host list")
			return
		}
		if _, _, e := net.SplitHostPort(h); e != nil {
			h = net.JoinHostPort(h, "6379")
		}
		if e := checkHostPort(h); e != nil {
			err = fmt.Errorf("address %q: %v", h, e)
			return
		}
		hosts = append(hosts, h)
	}
	return
}

func parseCluster(raw string, tlsOn bool, rest string) (RedisTarget, error) {
	bad := func(format string, a ...any) (RedisTarget, error) {
		return RedisTarget{}, fmt.Errorf("storage: bad redis cluster URL %q: %s: %w", raw, fmt.Sprintf(format, a...), ErrInvalid)
	}
	user, pass, _, hosts, path, query, err := splitHosts(rest)
	if err != nil {
		return bad("%v", err)
	}
	if p := strings.Trim(path, "/"); p != "" && p != "0" {
		return bad("path %q: Redis Cluster has only db 0", path)
	}
	// Reuse go-redis's query option parsing on the first seed.
	scheme := "redis"
	if tlsOn {
		scheme = "rediss"
	}
	u := &url.URL{Scheme: scheme, Host: hosts[0], RawQuery: query}
	co, err := redis.ParseClusterURL(u.String())
	if err != nil {
		return bad("%s", strings.TrimPrefix(err.Error(), "redis: "))
	}
	co.Addrs = hosts
	co.Username, co.Password = user, pass
	if tlsOn {
		h, _, _ := net.SplitHostPort(hosts[0])
		co.TLSConfig = &tls.Config{ServerName: h, MinVersion: tls.VersionTLS12}
	}
	return RedisTarget{Mode: modeCluster, Cluster: co}, nil
}

func parseSentinel(raw string, tlsOn bool, rest string) (RedisTarget, error) {
	bad := func(format string, a ...any) (RedisTarget, error) {
		return RedisTarget{}, fmt.Errorf("storage: bad redis sentinel URL %q: %s: %w", raw, fmt.Sprintf(format, a...), ErrInvalid)
	}
	user, pass, _, hosts, path, query, err := splitHosts(rest)
	if err != nil {
		return bad("%v", err)
	}
	segs := strings.FieldsFunc(path, func(r rune) bool { return r == '/' })
	if len(segs) == 0 {
		return bad("no master name: want redis+sentinel://host:port[,host:port]/MASTERNAME[/db]")
	}
	if len(segs) > 2 {
		return bad("path %q: want /MASTERNAME[/db]", path)
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return bad("query: %v", err)
	}
	fo := &redis.FailoverOptions{MasterName: segs[0], SentinelAddrs: hosts, Username: user, Password: pass}
	dbs := ""
	if len(segs) == 2 {
		dbs = segs[1]
	}
	if v := q.Get("db"); v != "" {
		dbs = v
	}
	if dbs != "" {
		n, err := strconv.Atoi(dbs)
		if err != nil || n < 0 {
			return bad("db %q is not a non-negative number", dbs)
		}
		fo.DB = n
	}
	for k, vs := range q {
		v := vs[len(vs)-1]
		switch k {
		case "db":
		case "sentinel_username":
			fo.SentinelUsername = v
		case "sentinel_password":
			fo.SentinelPassword = v
		case "replica_only", "route_by_latency", "route_randomly":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return bad("%s=%q is not a boolean", k, v)
			}
			switch k {
			case "replica_only":
				fo.ReplicaOnly = b
			case "route_by_latency":
				fo.RouteByLatency = b
			default:
				fo.RouteRandomly = b
			}
		case "client_name":
			fo.ClientName = v
		default:
			return bad("unknown query parameter %q (want db, sentinel_username, sentinel_password, client_name, replica_only, route_by_latency, route_randomly)", k)
		}
	}
	if fo.ReplicaOnly || fo.RouteByLatency || fo.RouteRandomly {
		// Reads from replicas could miss a leader's last write; wasmsched
		// always reads from the master.
		return bad("replica reads (replica_only, route_by_latency, route_randomly) are not supported: wasmsched reads from the master")
	}
	if tlsOn {
		h, _, _ := net.SplitHostPort(hosts[0])
		fo.TLSConfig = &tls.Config{ServerName: h, MinVersion: tls.VersionTLS12}
	}
	return RedisTarget{Mode: modeSentinel, Failover: fo}, nil
}
