// istio-render serve: Istio's own xDS discovery server (pilot/pkg/xds, run
// through istio.io/istio/pilot/test/xds.NewFakeDiscoveryServer) on a loopback
// port, serving one ingress gateway proxy the objects given as files, so that a
// real Envoy can take its listeners, routes, clusters and ECDS resources over
// delta ADS exactly as from istiod: push, debounce, delta xDS and the ECDS
// generator are Istio's code, unchanged.
//
// Usage:
//
//	istio-render serve [flags] FILE ...
//
// FILEs hold the Kubernetes and Istio objects (multi-document YAML or JSON, as
// for the render mode). stdin is the update channel, so "-" is not accepted.
//
// Protocol (one JSON object per line):
//
//	stdout, once ready:  {"xds":"127.0.0.1:PORT","node":{...}}
//	    xds:  the gRPC ADS address (plaintext, loopback only);
//	    node: the Envoy bootstrap `node` for the proxy the flags describe
//	          (-labels, -namespace, -ip, -id, -proxy-version, -cluster-id, as
//	          in the render mode): Istio reads the proxy from the node.
//	stdin:  {"config":"<multi-document YAML of EnvoyFilters>"[,"gc":true][,"kinds":[...]]}
//	    "kinds" (default ["EnvoyFilter"]) may also name Gateway, VirtualService
//	    and DestinationRule: the store's objects of every kind named are made
//	    exactly those given (a test of a shoot whose Gateway appears later).
//	    The config store's EnvoyFilters are now exactly these: new ones are
//	    created, changed ones (spec, labels or annotations) updated, missing
//	    ones deleted, unchanged ones left alone, all in Istio's config store,
//	    so Istio's own event handlers trigger (and debounce) the push. The
//	    writes are made back to back after every object was compared. With
//	    "gc", runtime.GC() runs before the writes, so that the garbage of
//	    parsing a large set is not collected during the push a benchmark times.
//	stdout: {"applied":N}   N = creates + updates + deletes
//	        {"error":"...","applied":N}  the update was refused (N = 0 when
//	          it did not parse or held other kinds: the store is unchanged)
//	stdin:  {"stats":true}  or  {"stats":true,"gc":true}
//	    What the discovery server has cost so far (for bench/istiod-push.ts);
//	    the store is not touched. With "gc", runtime.GC() runs first, so the
//	    heap figures are the live heap (what a push left held), not garbage
//	    waiting for the collector.
//	stdout: {"stats":{
//	          "uptime_ms": ms since the process started,
//	          "gc_forced": true when "gc" was asked,
//	          "memory": runtime.MemStats, read with runtime.ReadMemStats:
//	            heap_alloc, heap_inuse, heap_sys, heap_objects, sys,
//	            total_alloc, num_gc, gc_pause_total_ns (bytes, counts, ns);
//	            rss, rss_peak: VmRSS and VmHWM of /proc/self/status in bytes
//	            (absent where /proc is not readable),
//	          "pilot": {"<metric>": {"<label values, comma-joined, or empty>":
//	            {"count":N,"sum":X,"last":X,"max":X}}}
//	            every observation pilot recorded since start for the metrics in
//	            pilotMetricNames (push context init, push time and pushed bytes
//	            per xDS type, proxy convergence, debounce, triggers), taken
//	            through Istio's monitoring.RegisterRecordHook; xDS type labels
//	            are pilot's short names (lds, cds, rds, ecds, ...),
//	          "generated": {"<lds|cds|rds|ecds>": {"responses":N,"resources":N,
//	                                               "generate_ms":X,"transform_ms":X}}
//	            generator calls that produced resources, how many resources
//	            they produced (LDS and CDS after the changes below; for CDS
//	            over delta xDS only the changed clusters), the time spent in
//	            Istio's generators, and the time spent in those changes
//	            (pilot_xds_push_time includes both and the send; istiod would
//	            not spend the changes' time),
//	          "phases": {"startup_read_ms","startup_server_ms",
//	                     "update_parse_ms","update_compare_ms","update_write_ms"}
//	            reading the FILEs; building the discovery server with them
//	            (Istio parses the config, syncs its registries and builds the
//	            first push context); for the last update: parsing it,
//	            comparing it with the store, then writing the changed objects
//	            (Istio's event handlers run in the writes)}}
//
// The server exits when stdin is closed.
//
// What a stock Envoy on loopback cannot take from istiod is changed on the
// way out, by wrapping the LDS and CDS generators (the same changes as
// test/istio/istio-bootstrap.ts makes to a static render; every resource is
// Istio's output otherwise):
//
//   - listeners: bound to 127.0.0.1:0 and [::1]:0 (kernel-chosen ports; the
//     names stay), listeners on a pipe address dropped, the Istio-only filters
//     (istio.metadata_exchange, istio.alpn, istio.stats) dropped, SDS secrets
//     of gateway credentials lose their config source (Envoy then uses the
//     bootstrap's static secret of the same name), file access logs to
//     /dev/stdout written by the stdout access logger;
//   - internal listeners, and clusters whose endpoints are all internal
//     addresses (the ACL's per-shoot hop), are sent as Istio generated them;
//   - clusters: every other cluster with endpoints (EDS, pipe, DNS, IP) becomes a
//     STATIC cluster with the one endpoint 127.0.0.1:<port> from the
//     -upstreams map {"<EDS service name, else cluster name>": port}; a cluster not in the map is
//     dropped (one stderr line), or, with -upstream-fallback PORT, points at
//     127.0.0.1:PORT (a benchmark that needs every cluster but no traffic
//     through it, without listing them all); clusters lose their filters and upstream
//     transport sockets; ORIGINAL_DST clusters are dropped. No cluster sent
//     points anywhere but loopback.
//
// Routes (RDS) and ECDS resources are sent as Istio generated them (their
// generators are wrapped only to count what they produce, for "stats").
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"istio.io/istio/pilot/pkg/config/kube/crd"
	"istio.io/istio/pilot/pkg/model"
	v3 "istio.io/istio/pilot/pkg/xds/v3"
	xdsfake "istio.io/istio/pilot/test/xds"
	"istio.io/istio/pkg/cluster"
	"istio.io/istio/pkg/config"
	"istio.io/istio/pkg/config/schema/gvk"
	"istio.io/istio/pkg/monitoring"
)

// istioOnlyFilters are filters of Istio's own Envoy build (istio/proxy) that
// upstream Envoy does not have.
var istioOnlyFilters = map[string]bool{"istio.metadata_exchange": true, "istio.alpn": true, "istio.stats": true}

// transformer post-processes Istio's listeners and clusters for a stock Envoy
// on loopback. Safe for concurrent use (pushes to several connections).
type transformer struct {
	upstreams map[string]int
	// fallback: the port of clusters not in upstreams (0: they are dropped).
	fallback int
	mu       sync.Mutex
	reported map[string]bool
}

// report writes a line to stderr once per distinct message.
func (t *transformer) report(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.reported[msg] {
		t.reported[msg] = true
		fmt.Fprintln(os.Stderr, "istio-render serve:", msg)
	}
}

func toJSONMap(m proto.Message) (map[string]any, error) {
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var out map[string]any
	return out, d.Decode(&out)
}

func fromJSONMap(obj map[string]any, m proto.Message) error {
	b, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	return protojson.Unmarshal(b, m)
}

func loopbackAddress(ip string) map[string]any {
	return map[string]any{"socket_address": map[string]any{"address": ip, "port_value": 0}}
}

// walk rewrites, wherever they sit in a listener: Istio-only filters (dropped),
// SDS secret configs (config source removed), /dev/stdout file access logs.
func walk(node any) any {
	switch v := node.(type) {
	case []any:
		out := v[:0]
		for _, e := range v {
			out = append(out, walk(e))
		}
		return out
	case map[string]any:
		for key, value := range v {
			switch key {
			case "filters", "http_filters":
				if list, ok := value.([]any); ok {
					kept := []any{}
					for _, f := range list {
						if fm, ok := f.(map[string]any); ok && istioOnlyFilters[fmt.Sprint(fm["name"])] {
							continue
						}
						kept = append(kept, walk(f))
					}
					v[key] = kept
					continue
				}
			case "tls_certificate_sds_secret_configs", "validation_context_sds_secret_config":
				configs, ok := value.([]any)
				if !ok {
					configs = []any{value}
				}
				for _, c := range configs {
					if cm, ok := c.(map[string]any); ok {
						delete(cm, "sds_config")
					}
				}
				continue
			case "access_log":
				if list, ok := value.([]any); ok {
					for i, logger := range list {
						list[i] = stdoutAccessLog(logger)
					}
					continue
				}
			}
			v[key] = walk(value)
		}
		return v
	}
	return node
}

// stdoutAccessLog replaces a file access logger writing to /dev/stdout (which
// cannot be opened on the socket the harness reads Envoy's stdout from) by
// Envoy's stdout access logger with the same format.
func stdoutAccessLog(logger any) any {
	lm, ok := logger.(map[string]any)
	if !ok || lm["name"] != "envoy.access_loggers.file" {
		return logger
	}
	tc, _ := lm["typed_config"].(map[string]any)
	if tc == nil || tc["path"] != "/dev/stdout" {
		return logger
	}
	typed := map[string]any{"@type": "type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog"}
	if format, ok := tc["log_format"]; ok {
		typed["log_format"] = format
	}
	return map[string]any{"name": "envoy.access_loggers.stdout", "typed_config": typed}
}

func (t *transformer) listener(a *anypb.Any) (proto.Message, error) {
	l := &listenerv3.Listener{}
	if err := a.UnmarshalTo(l); err != nil {
		return nil, err
	}
	if l.GetInternalListener() != nil {
		// An internal listener (the ACL's per-shoot hop) binds no socket: kept, filters walked.
		obj, err := toJSONMap(l)
		if err != nil {
			return nil, err
		}
		walk(obj)
		out := &listenerv3.Listener{}
		return out, fromJSONMap(obj, out)
	}
	if l.GetAddress().GetSocketAddress() == nil {
		t.report("listener %s: dropped (not on a TCP socket address)", l.GetName())
		return nil, nil
	}
	obj, err := toJSONMap(l)
	if err != nil {
		return nil, err
	}
	obj["address"] = loopbackAddress("127.0.0.1")
	obj["additional_addresses"] = []any{map[string]any{"address": loopbackAddress("::1")}}
	walk(obj)
	out := &listenerv3.Listener{}
	return out, fromJSONMap(obj, out)
}

func hasEndpoints(c *clusterv3.Cluster) bool {
	for _, locality := range c.GetLoadAssignment().GetEndpoints() {
		if len(locality.GetLbEndpoints()) > 0 {
			return true
		}
	}
	return false
}

// internalOnly: every endpoint is an Envoy internal address (a listener in this Envoy).
func internalOnly(c *clusterv3.Cluster) bool {
	found := false
	for _, locality := range c.GetLoadAssignment().GetEndpoints() {
		for _, e := range locality.GetLbEndpoints() {
			if e.GetEndpoint().GetAddress().GetEnvoyInternalAddress() == nil {
				return false
			}
			found = true
		}
	}
	return found
}

func (t *transformer) cluster(a *anypb.Any) (proto.Message, error) {
	c := &clusterv3.Cluster{}
	if err := a.UnmarshalTo(c); err != nil {
		return nil, err
	}
	if internalOnly(c) {
		return c, nil // a door into an internal listener reaches nothing outside this Envoy
	}
	// Istio's clusters come from a cache: c is a copy (unmarshalled from a).
	c.Filters = nil
	c.TransportSocket = nil
	c.TransportSocketMatches = nil
	switch {
	case c.GetType() == clusterv3.Cluster_ORIGINAL_DST:
		t.report("cluster %s: dropped (ORIGINAL_DST)", c.GetName())
		return nil, nil
	case c.GetClusterType() != nil:
		// A custom cluster type (aggregate, dynamic forward proxy) could reach anything.
		t.report("cluster %s: dropped (cluster_type %s)", c.GetName(), c.GetClusterType().GetName())
		return nil, nil
	case c.GetType() == clusterv3.Cluster_STATIC && !hasEndpoints(c):
		return c, nil // e.g. BlackHoleCluster
	}
	// Endpoints are looked up by the EDS service name: a cluster an EnvoyFilter renamed still gets Istio's endpoints of that service.
	upstream := c.GetName()
	if service := c.GetEdsClusterConfig().GetServiceName(); service != "" {
		upstream = service
	}
	port, ok := t.upstreams[upstream]
	if !ok && t.fallback != 0 {
		port, ok = t.fallback, true
	}
	if !ok {
		t.report("cluster %s: dropped (no upstream in -upstreams for %s)", c.GetName(), upstream)
		return nil, nil
	}
	c.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}
	c.EdsClusterConfig = nil
	c.LoadAssignment = &endpointv3.ClusterLoadAssignment{
		ClusterName: c.GetName(),
		Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: &corev3.Address{
				Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
					Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(port)},
				}},
			}}},
		}}}},
	}
	return c, nil
}

// transform applies fn to every resource; fn returning nil drops the resource.
// New Resource values are built: Istio may cache the ones it generated.
func transform(res model.Resources, fn func(*anypb.Any) (proto.Message, error)) (model.Resources, error) {
	if res == nil {
		return nil, nil
	}
	out := make(model.Resources, 0, len(res))
	for _, r := range res {
		m, err := fn(r.GetResource())
		if err != nil {
			fmt.Fprintf(os.Stderr, "istio-render serve: transforming %s: %v\n", r.GetName(), err)
			return nil, fmt.Errorf("transforming %s: %w", r.GetName(), err)
		}
		if m == nil {
			continue
		}
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil {
			return nil, err
		}
		out = append(out, &discovery.Resource{
			Name: r.GetName(), Version: r.GetVersion(), Aliases: r.GetAliases(), Ttl: r.GetTtl(),
			CacheControl: r.GetCacheControl(), Metadata: r.GetMetadata(),
			Resource: &anypb.Any{TypeUrl: r.GetResource().GetTypeUrl(), Value: b},
		})
	}
	return out, nil
}

// wrapped is an Istio generator whose output goes through fn (nil: unchanged),
// counted under kind in generated (for the "stats" reply).
type wrapped struct {
	inner model.XdsResourceGenerator
	fn    func(*anypb.Any) (proto.Message, error)
	kind  string
}

func (w wrapped) Generate(p *model.Proxy, wr *model.WatchedResource, req *model.PushRequest) (model.Resources, model.XdsLogDetails, error) {
	generateStart := time.Now()
	res, logs, err := w.inner.Generate(p, wr, req)
	if err != nil {
		return nil, logs, err
	}
	res, err = w.finish(res, time.Since(generateStart))
	return res, logs, err
}

// finish rewrites what Istio generated through fn (when set) and counts it
// under kind, with the time Istio's generator took.
func (w wrapped) finish(res model.Resources, generate time.Duration) (model.Resources, error) {
	var took time.Duration
	var err error
	if w.fn != nil {
		start := time.Now()
		res, err = transform(res, w.fn)
		took = time.Since(start)
	}
	generated.count(w.kind, res, generate, took)
	return res, err
}

// wrappedDelta keeps the delta interface of generators that have it (CDS), so
// the server still takes their delta path.
type wrappedDelta struct {
	wrapped
	delta model.XdsDeltaResourceGenerator
}

func (w wrappedDelta) GenerateDeltas(p *model.Proxy, req *model.PushRequest, wr *model.WatchedResource) (model.Resources, model.DeletedResources, model.XdsLogDetails, bool, error) {
	generateStart := time.Now()
	res, deleted, logs, usedDelta, err := w.delta.GenerateDeltas(p, req, wr)
	if err != nil {
		return nil, nil, logs, usedDelta, err
	}
	res, err = w.finish(res, time.Since(generateStart))
	return res, deleted, logs, usedDelta, err
}

func wrap(g model.XdsResourceGenerator, fn func(*anypb.Any) (proto.Message, error), kind string) model.XdsResourceGenerator {
	w := wrapped{inner: g, fn: fn, kind: kind}
	if d, ok := g.(model.XdsDeltaResourceGenerator); ok {
		return wrappedDelta{wrapped: w, delta: d}
	}
	return w
}

func readUpstreams(path string) (map[string]int, error) {
	upstreams := map[string]int{}
	if path == "" {
		return upstreams, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &upstreams); err != nil {
		return nil, fmt.Errorf("-upstreams %s: %w", path, err)
	}
	for name, port := range upstreams {
		if port < 1 || port > 65535 {
			return nil, fmt.Errorf("-upstreams %s: cluster %s: bad port %d", path, name, port)
		}
	}
	return upstreams, nil
}

// replaceableKinds are the kinds an update may replace, by the name it gives them.
var replaceableKinds = map[string]config.GroupVersionKind{
	"EnvoyFilter":     gvk.EnvoyFilter,
	"Gateway":         gvk.Gateway,
	"VirtualService":  gvk.VirtualService,
	"DestinationRule": gvk.DestinationRule,
}

func sameConfig(a, b *config.Config) bool {
	return maps.Equal(a.Labels, b.Labels) && maps.Equal(a.Annotations, b.Annotations) &&
		proto.Equal(a.Spec.(proto.Message), b.Spec.(proto.Message))
}

// replaceConfigs makes the store's objects of the given kinds exactly those in yamlText.
// Everything is parsed and checked before the store is touched. The writes
// are planned first (comparing every object, which takes seconds for
// thousands of large EnvoyFilters) and then made back to back, as a
// controller writing the changed objects would: writes spread over the
// comparisons would reach Istio's debounce further apart than 100 ms and be
// pushed in several pushes.
func replaceConfigs(store model.ConfigStoreController, yamlText string, kindNames []string, gc bool) (int, error) {
	kinds := map[config.GroupVersionKind]bool{}
	if len(kindNames) == 0 {
		kindNames = []string{"EnvoyFilter"}
	}
	for _, name := range kindNames {
		k, ok := replaceableKinds[name]
		if !ok {
			return 0, fmt.Errorf("kind %q cannot be replaced (EnvoyFilter, Gateway, VirtualService, DestinationRule can)", name)
		}
		kinds[k] = true
	}
	parseStart := time.Now()
	configs, _, err := crd.ParseInputs(yamlText)
	if err != nil {
		return 0, err
	}
	phases["update_parse_ms"] = since(parseStart)
	compareStart := time.Now()
	want := map[string]config.Config{}
	now := time.Now()
	for _, c := range configs {
		if !kinds[c.GroupVersionKind] {
			return 0, fmt.Errorf("%s %s/%s: only %s can be replaced by this update", c.GroupVersionKind.Kind, c.Namespace, c.Name, strings.Join(kindNames, ", "))
		}
		if c.Namespace == "" {
			c.Namespace = "default"
		}
		if _, ok := c.Spec.(proto.Message); !ok {
			return 0, fmt.Errorf("%s %s/%s: spec is no proto message", c.GroupVersionKind.Kind, c.Namespace, c.Name)
		}
		want[c.GroupVersionKind.Kind+"/"+c.Namespace+"/"+c.Name] = c
	}
	var creates, updates, deletes []config.Config
	for _, c := range want {
		existing := store.Get(c.GroupVersionKind, c.Name, c.Namespace)
		if existing == nil {
			if c.CreationTimestamp.IsZero() {
				c.CreationTimestamp = now
			}
			creates = append(creates, c)
			continue
		}
		if sameConfig(existing, &c) {
			continue
		}
		if c.CreationTimestamp.IsZero() {
			c.CreationTimestamp = existing.CreationTimestamp
		}
		c.ResourceVersion = ""
		updates = append(updates, c)
	}
	for k := range kinds {
		for _, c := range store.List(k, model.NamespaceAll) {
			if _, ok := want[k.Kind+"/"+c.Namespace+"/"+c.Name]; !ok {
				deletes = append(deletes, c)
			}
		}
	}
	phases["update_compare_ms"] = since(compareStart)
	if gc {
		configs, want = nil, nil // garbage now: only the planned writes are needed
		runtime.GC()
	}
	writeStart := time.Now()
	defer func() { phases["update_write_ms"] = since(writeStart) }()
	applied := 0
	for _, c := range creates {
		if _, err := store.Create(c); err != nil {
			return applied, fmt.Errorf("creating %s/%s: %w", c.Namespace, c.Name, err)
		}
		applied++
	}
	for _, c := range updates {
		if _, err := store.Update(c); err != nil {
			return applied, fmt.Errorf("updating %s/%s: %w", c.Namespace, c.Name, err)
		}
		applied++
	}
	for _, c := range deletes {
		if err := store.Delete(c.GroupVersionKind, c.Name, c.Namespace, nil); err != nil {
			return applied, fmt.Errorf("deleting %s/%s: %w", c.Namespace, c.Name, err)
		}
		applied++
	}
	return applied, nil
}

func writeLine(w io.Writer, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		os.Exit(1) // the reader is gone
	}
}

func serveMain(args []string) {
	fs := flag.NewFlagSet("istio-render serve", flag.ExitOnError)
	var (
		pf            = addProxyFlags(fs)
		upstreamsFile = fs.String("upstreams", "", "JSON file {\"<cluster name>\": <loopback port>}: where each cluster's STATIC endpoint points")
		fallback      = fs.Int("upstream-fallback", 0, "loopback port for every cluster not in -upstreams (0: such clusters are dropped)")
		debounce      = fs.Duration("debounce", 100*time.Millisecond, "quiet period before a push (istiod's PILOT_DEBOUNCE_AFTER default is 100ms)")
		logLevel      = fs.String("log-level", "error", "Istio log level (none, error, warn, info, debug)")
		verbose       = fs.Bool("v", false, "print harness log lines to stderr")
	)
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: istio-render serve [flags] FILE ...\n")
		fs.PrintDefaults()
	}
	_ = fs.Parse(args)
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "istio-render serve:", err)
		os.Exit(2)
	}
	if fs.NArg() == 0 || slices.Contains(fs.Args(), "-") {
		fail(errors.New("give the objects as files; stdin carries the updates"))
	}
	if err := configureLogs(*logLevel); err != nil {
		fail(err)
	}
	lbls, err := parseLabels(*pf.labels)
	if err != nil {
		fail(err)
	}
	upstreams, err := readUpstreams(*upstreamsFile)
	if err != nil {
		fail(err)
	}
	readStart := time.Now()
	data, err := readInputs(fs.Args())
	if err != nil {
		fail(err)
	}
	kubeObjs, istioYAML, err := splitInputs(data)
	if err != nil {
		fail(err)
	}
	phases["startup_read_ms"] = since(readStart)
	m, err := loadMeshConfig(*pf.meshFile)
	if err != nil {
		fail(err)
	}
	if *fallback < 0 || *fallback > 65535 {
		fail(fmt.Errorf("-upstream-fallback %d: not a port", *fallback))
	}
	// Before the server exists, so that its first push context is recorded too.
	metrics := newPilotMetrics()

	serverStart := time.Now()
	fake := xdsfake.NewFakeDiscoveryServer(&failer{verbose: *verbose}, xdsfake.FakeOptions{
		DefaultClusterName:         cluster.ID(*pf.clusterID),
		KubernetesObjects:          kubeObjs,
		ConfigString:               istioYAML,
		MeshConfig:                 m,
		ListenerBuilder:            func() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") },
		DebounceTime:               *debounce,
		DisableSecretAuthorization: true,
	})
	phases["startup_server_ms"] = since(serverStart)
	// No proxy is connected yet: nobody reads the generators concurrently.
	t := &transformer{upstreams: upstreams, fallback: *fallback, reported: map[string]bool{}}
	gens := fake.Discovery.Generators
	gens[v3.ListenerType] = wrap(gens[v3.ListenerType], t.listener, "lds")
	gens[v3.ClusterType] = wrap(gens[v3.ClusterType], t.cluster, "cds")
	gens[v3.RouteType] = wrap(gens[v3.RouteType], nil, "rds")
	gens[v3.ExtensionConfigurationType] = wrap(gens[v3.ExtensionConfigurationType], nil, "ecds")

	id := pf.id()
	labelValues := map[string]any{}
	for k, v := range lbls {
		labelValues[k] = v
	}
	node := map[string]any{
		"id":      fmt.Sprintf("router~%s~%s~%s.svc.cluster.local", *pf.podIP, id, *pf.namespace),
		"cluster": "istio-ingressgateway." + *pf.namespace,
		"metadata": map[string]any{
			"NAMESPACE": *pf.namespace, "LABELS": labelValues, "ISTIO_VERSION": *pf.proxyVersion,
			"CLUSTER_ID": *pf.clusterID, "INSTANCE_IPS": *pf.podIP, "NAME": strings.SplitN(id, ".", 2)[0],
		},
	}
	out := bufio.NewWriter(os.Stdout)
	flush := func(v any) {
		writeLine(out, v)
		_ = out.Flush()
	}
	flush(map[string]any{"xds": fake.Listener.Addr().String(), "node": node})

	in := bufio.NewReader(os.Stdin)
	for {
		line, err := in.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var u struct {
				Config *string  `json:"config"`
				Kinds  []string `json:"kinds"`
				Stats  bool     `json:"stats"`
				GC     bool     `json:"gc"`
			}
			switch decodeErr := json.Unmarshal(line, &u); {
			case decodeErr != nil:
				flush(map[string]any{"error": "bad update line: " + decodeErr.Error()})
			case u.Config == nil && u.Stats:
				flush(map[string]any{"stats": currentStats(metrics, u.GC)})
			case u.Config == nil:
				flush(map[string]any{"error": "update line without \"config\""})
			default:
				if n, err := replaceConfigs(fake.Store(), *u.Config, u.Kinds, u.GC); err != nil {
					flush(map[string]any{"error": err.Error(), "applied": n})
				} else {
					flush(map[string]any{"applied": n})
				}
			}
		}
		if err != nil {
			// stdin closed (or broken): the harness is gone. Skip the cleanups, as the render mode does.
			os.Exit(0)
		}
	}
}

// pilotMetricNames are the pilot metrics the "stats" reply reports: what a push
// costs istiod (pilot/pkg/xds/monitoring.go).
var pilotMetricNames = []string{
	"pilot_pushcontext_init_seconds", // building the PushContext of a push (all config, all proxies)
	"pilot_xds_push_time",            // per xDS type: generating and sending one response to one proxy
	"pilot_xds_config_size_bytes",    // per xDS type: the bytes of one response
	"pilot_proxy_convergence_time",   // first config event of a push until the proxy was sent every type
	"pilot_debounce_time",            // first config event until the merged push was queued
	"pilot_push_triggers",            // pushes, by reason
	"pilot_inbound_updates",          // config events received
}

type observations struct {
	Count int64   `json:"count"`
	Sum   float64 `json:"sum"`
	Last  float64 `json:"last"`
	Max   float64 `json:"max"`
}

// pilotMetrics accumulates every observation of pilotMetricNames. Istio's
// metrics go to OpenTelemetry, which needs an exporter to be read; its record
// hooks see each observation as it is made, which is all a benchmark needs.
type pilotMetrics struct {
	mu   sync.Mutex
	seen map[string]map[string]*observations
}

func newPilotMetrics() *pilotMetrics {
	p := &pilotMetrics{seen: map[string]map[string]*observations{}}
	for _, name := range pilotMetricNames {
		monitoring.RegisterRecordHook(name, p)
	}
	return p
}

// OnRecord is Istio's monitoring.RecordHook. Label keys are not exported by
// Istio's monitoring package; each of these metrics has at most one label
// ("type"), so its values identify the series.
func (p *pilotMetrics) OnRecord(name string, tags []monitoring.LabelValue, value float64) {
	values := make([]string, 0, len(tags))
	for _, tag := range tags {
		v := tag.Value()
		if strings.Contains(v, "/") {
			v = v3.GetMetricType(v) // pilot_xds_config_size_bytes is labelled with the type URL
		}
		values = append(values, v)
	}
	series := strings.Join(values, ",")
	p.mu.Lock()
	defer p.mu.Unlock()
	byLabel := p.seen[name]
	if byLabel == nil {
		byLabel = map[string]*observations{}
		p.seen[name] = byLabel
	}
	o := byLabel[series]
	if o == nil {
		o = &observations{}
		byLabel[series] = o
	}
	o.Count++
	o.Sum += value
	o.Last = value
	if o.Count == 1 || value > o.Max {
		o.Max = value
	}
}

func (p *pilotMetrics) snapshot() map[string]map[string]observations {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]map[string]observations{}
	for name, byLabel := range p.seen {
		out[name] = map[string]observations{}
		for series, o := range byLabel {
			out[name][series] = *o
		}
	}
	return out
}

type generatedCount struct {
	Responses int64 `json:"responses"`
	Resources int64 `json:"resources"`
	// GenerateMs: time in Istio's generator (pilot_xds_push_time also holds
	// the send, which waits while the proxy is slow to read).
	GenerateMs float64 `json:"generate_ms"`
	// TransformMs: time spent in this tool's loopback rewrite (transform), which
	// pilot_xds_push_time includes but istiod would not spend.
	TransformMs float64 `json:"transform_ms"`
}

// generatedCounts: what the wrapped generators produced, by xDS type.
type generatedCounts struct {
	mu     sync.Mutex
	byKind map[string]*generatedCount
}

var generated = &generatedCounts{byKind: map[string]*generatedCount{}}

func (g *generatedCounts) count(kind string, res model.Resources, generate, transform time.Duration) {
	if res == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.byKind[kind]
	if c == nil {
		c = &generatedCount{}
		g.byKind[kind] = c
	}
	c.Responses++
	c.Resources += int64(len(res))
	c.GenerateMs += float64(generate.Microseconds()) / 1000
	c.TransformMs += float64(transform.Microseconds()) / 1000
}

func (g *generatedCounts) snapshot() map[string]generatedCount {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[string]generatedCount{}
	for kind, c := range g.byKind {
		out[kind] = *c
	}
	return out
}

var processStart = time.Now()

// phases: how long the parts of start-up and of the last update took, ms
// (reported by "stats"; written by the main goroutine only, read by it too).
var phases = map[string]float64{}

func since(start time.Time) float64 { return float64(time.Since(start).Microseconds()) / 1000 }

// procStatusBytes reads a "kB" line of /proc/self/status (VmRSS, VmHWM) in bytes.
func procStatusBytes() map[string]uint64 {
	out := map[string]uint64{}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		key, rest, ok := strings.Cut(line, ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			continue
		}
		if kb, err := strconv.ParseUint(fields[0], 10, 64); err == nil {
			out[map[string]string{"VmRSS": "rss", "VmHWM": "rss_peak"}[key]] = kb * 1024
		}
	}
	return out
}

// currentStats is the "stats" reply (see the header comment).
func currentStats(metrics *pilotMetrics, gc bool) map[string]any {
	if gc {
		runtime.GC()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	memory := map[string]uint64{
		"heap_alloc": ms.HeapAlloc, "heap_inuse": ms.HeapInuse, "heap_sys": ms.HeapSys, "heap_objects": ms.HeapObjects,
		"sys": ms.Sys, "total_alloc": ms.TotalAlloc, "num_gc": uint64(ms.NumGC), "gc_pause_total_ns": ms.PauseTotalNs,
	}
	maps.Copy(memory, procStatusBytes())
	return map[string]any{
		"uptime_ms": float64(time.Since(processStart).Microseconds()) / 1000,
		"gc_forced": gc,
		"memory":    memory,
		"pilot":     metrics.snapshot(),
		"generated": generated.snapshot(),
		"phases":    maps.Clone(phases),
	}
}
