// Command istio-render prints the Envoy listeners, routes and clusters that an
// Istio ingress gateway (a Router proxy) receives for a set of Kubernetes and
// Istio objects, without a cluster and without istiod.
//
// It drives Istio's own config-generation test harness
// (istio.io/istio/pilot/pkg/networking/core.NewConfigGenTest), so Gateway
// merging, port translation and EnvoyFilter patching are Istio's code, not a
// re-implementation. Kubernetes objects (Services, Endpoints, Pods, ...) are
// served to Istio's Kubernetes service registry through a fake clientset, the
// same way Istio's own xDS tests do it.
//
// Usage:
//
//	istio-render [flags] [FILE ...]      (no FILE or "-": read stdin)
//	istio-render serve [flags] FILE ...  (Istio's xDS server on loopback; see serve.go)
//
// Output (stdout): one JSON object
//
//	{"istio": "<module version>", "proxy": {...},
//	 "listeners": [envoy.config.listener.v3.Listener ...],
//	 "routes":    [envoy.config.route.v3.RouteConfiguration ...],
//	 "clusters":  [envoy.config.cluster.v3.Cluster ...],
//	 "extension_configs": [envoy.config.core.v3.TypedExtensionConfig ...],   (with -resources ...,extension_configs)
//	 "discovered_filters": [names of the HTTP filters configured through ECDS]}
//
// Every element is protojson of the Envoy proto (field names as in the
// .proto files, i.e. snake_case, Any with "@type"), loadable by Envoy.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sort"
	"strings"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	meshconfig "istio.io/api/mesh/v1alpha1"
	"istio.io/istio/pilot/pkg/model"
	"istio.io/istio/pilot/pkg/networking/core"
	"istio.io/istio/pilot/pkg/serviceregistry"
	kubecontroller "istio.io/istio/pilot/pkg/serviceregistry/kube/controller"
	"istio.io/istio/pkg/cluster"
	"istio.io/istio/pkg/config/mesh"
	"istio.io/istio/pkg/config/mesh/meshwatcher"
	kubelib "istio.io/istio/pkg/kube"
	istiolog "istio.io/istio/pkg/log"
)

// discoveredFilterNames lists, sorted, the HTTP filters of the listeners'
// connection managers (default filter chains included) whose config comes from ECDS.
func discoveredFilterNames(listeners []*listenerv3.Listener) ([]string, error) {
	seen := map[string]bool{}
	for _, l := range listeners {
		chains := l.GetFilterChains()
		if dc := l.GetDefaultFilterChain(); dc != nil {
			chains = append(chains, dc)
		}
		for _, chain := range chains {
			for _, f := range chain.GetFilters() {
				tc := f.GetTypedConfig()
				if tc == nil || tc.GetTypeUrl() != "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager" {
					continue
				}
				hcm := &hcmv3.HttpConnectionManager{}
				if err := tc.UnmarshalTo(hcm); err != nil {
					return nil, fmt.Errorf("listener %s: %w", l.GetName(), err)
				}
				for _, hf := range hcm.GetHttpFilters() {
					if hf.GetConfigDiscovery() != nil {
						seen[hf.GetName()] = true
					}
				}
			}
		}
	}
	names := make([]string, 0, len(seen))
	for name := range seen {
		names = append(names, name)
	}
	sort.Strings(names)
	return names, nil
}

// failer is the minimal istio.io/istio/pkg/test.Failer the harness needs.
type failer struct {
	verbose  bool
	cleanups []func()
}

func (f *failer) Fail()             { f.FailNow() }
func (f *failer) FailNow()          { os.Exit(1) }
func (f *failer) Helper()           {}
func (f *failer) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }
func (f *failer) Fatal(args ...any) {
	fmt.Fprintln(os.Stderr, append([]any{"istio-render: fatal:"}, args...)...)
	os.Exit(1)
}
func (f *failer) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "istio-render: fatal: "+format+"\n", args...)
	os.Exit(1)
}
func (f *failer) Skip(args ...any) { f.Fatal(append([]any{"skip:"}, args...)...) }
func (f *failer) Log(args ...any) {
	if f.verbose {
		fmt.Fprintln(os.Stderr, args...)
	}
}
func (f *failer) Logf(format string, args ...any) {
	if f.verbose {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
	}
}
func (f *failer) TempDir() string {
	d, err := os.MkdirTemp("", "istio-render-")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

func parseLabels(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("bad label %q (want key=value)", kv)
		}
		out[k] = v
	}
	return out, nil
}

func readInputs(files []string) ([]byte, error) {
	if len(files) == 0 {
		files = []string{"-"}
	}
	var buf bytes.Buffer
	for _, f := range files {
		var b []byte
		var err error
		if f == "-" {
			b, err = io.ReadAll(os.Stdin)
		} else {
			b, err = os.ReadFile(f)
		}
		if err != nil {
			return nil, err
		}
		buf.WriteString("\n---\n")
		buf.Write(b)
		buf.WriteString("\n")
	}
	return buf.Bytes(), nil
}

// isKubernetesObject reports whether a document is a core Kubernetes object
// that belongs to the service registry (rather than Istio config).
func isKubernetesObject(apiVersion, kind string) bool {
	group := ""
	if i := strings.Index(apiVersion, "/"); i >= 0 {
		group = apiVersion[:i]
	}
	switch group {
	case "", "discovery.k8s.io", "apps":
		return true
	}
	return false
}

// splitInputs separates Kubernetes objects (for the fake clientset behind
// Istio's Kubernetes registry) from Istio config documents (for the harness's
// ConfigString, parsed by Istio's crd.ParseInputs with validation).
func splitInputs(data []byte) ([]runtime.Object, string, error) {
	var kubeObjs []runtime.Object
	var istio strings.Builder
	decode := kubelib.IstioCodec.UniversalDeserializer().Decode
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, "", err
		}
		var tm struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return nil, "", fmt.Errorf("parsing document: %w", err)
		}
		if tm.Kind == "" {
			continue // empty document or comments only
		}
		if tm.Kind == "List" {
			return nil, "", fmt.Errorf("kind List is not supported; use a multi-document YAML")
		}
		if isKubernetesObject(tm.APIVersion, tm.Kind) {
			o, _, err := decode(doc, nil, nil)
			if err != nil {
				return nil, "", fmt.Errorf("decoding %s %s: %w", tm.APIVersion, tm.Kind, err)
			}
			kubeObjs = append(kubeObjs, o)
			continue
		}
		istio.WriteString("---\n")
		istio.Write(doc)
		istio.WriteString("\n")
	}
	return kubeObjs, istio.String(), nil
}

func istioModuleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "istio.io/istio" {
				return d.Version
			}
		}
	}
	return "unknown"
}

func marshalAll[T proto.Message](mo protojson.MarshalOptions, items []T) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, 0, len(items))
	for _, it := range items {
		b, err := mo.Marshal(it)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// proxyFlags are the flags both modes take: the gateway proxy and its mesh.
type proxyFlags struct {
	labels, namespace, podIP, proxyID, proxyVersion, clusterID, meshFile *string
}

func addProxyFlags(fs *flag.FlagSet) proxyFlags {
	return proxyFlags{
		labels:       fs.String("labels", "app=istio-ingressgateway,istio=ingressgateway", "gateway proxy labels, k=v,k=v"),
		namespace:    fs.String("namespace", "istio-ingress", "gateway proxy namespace"),
		podIP:        fs.String("ip", "10.0.0.10", "gateway proxy (pod) IP (an identity only; nothing connects to it)"),
		proxyID:      fs.String("id", "", "proxy ID (default istio-ingressgateway-render.<namespace>)"),
		proxyVersion: fs.String("proxy-version", "1.30.3", "Istio version the proxy claims (matters for version-gated features and EnvoyFilter match.proxy.proxyVersion)"),
		clusterID:    fs.String("cluster-id", "Kubernetes", "cluster ID of the Kubernetes registry and the proxy"),
		meshFile:     fs.String("mesh-config", "", "optional MeshConfig YAML (defaults applied on top)"),
	}
}

// id is the proxy ID: -id, or istio-ingressgateway-render.<namespace>.
func (p proxyFlags) id() string {
	if *p.proxyID != "" {
		return *p.proxyID
	}
	return "istio-ingressgateway-render." + *p.namespace
}

// configureLogs sends Istio's logs to stderr at the given level (Istio logs to
// stdout by default; stdout is kept for the JSON output).
func configureLogs(level string) error {
	lo := istiolog.DefaultOptions()
	lo.OutputPaths = []string{"stderr"}
	lo.ErrorOutputPaths = []string{"stderr"}
	lo.SetDefaultOutputLevel(istiolog.DefaultScopeName, istiolog.StringToLevel(level))
	for _, s := range istiolog.Scopes() {
		s.SetOutputLevel(istiolog.StringToLevel(level))
	}
	return istiolog.Configure(lo)
}

// loadMeshConfig reads a MeshConfig YAML with Istio's defaults applied, or
// returns the default MeshConfig when path is empty.
func loadMeshConfig(path string) (*meshconfig.MeshConfig, error) {
	if path == "" {
		return mesh.DefaultMeshConfig(), nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m, err := mesh.ApplyMeshConfigDefaults(string(b))
	if err != nil {
		return nil, fmt.Errorf("mesh config: %w", err)
	}
	return m, nil
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		serveMain(os.Args[2:])
		return
	}
	var (
		pf           = addProxyFlags(flag.CommandLine)
		domainSuffix = flag.String("domain-suffix", "cluster.local", "Kubernetes DNS domain suffix")
		resources    = flag.String("resources", "listeners,routes,clusters", "which resources to print")
		pretty       = flag.Bool("pretty", false, "indent the JSON output")
		outFile      = flag.String("o", "", "write output to this file instead of stdout")
		logLevel     = flag.String("log-level", "error", "Istio log level (none, error, warn, info, debug)")
		verbose      = flag.Bool("v", false, "print harness log lines to stderr")
		showVersion  = flag.Bool("version", false, "print the istio.io/istio module version and exit")
	)
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: istio-render [flags] [FILE ...]   (no FILE or \"-\": stdin)\n       istio-render serve -h             (xDS server mode)\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *showVersion {
		fmt.Println("istio-render istio.io/istio@" + istioModuleVersion())
		return
	}

	if err := configureLogs(*logLevel); err != nil {
		fmt.Fprintln(os.Stderr, "istio-render: configuring logs:", err)
		os.Exit(2)
	}

	lbls, err := parseLabels(*pf.labels)
	if err != nil {
		fmt.Fprintln(os.Stderr, "istio-render:", err)
		os.Exit(2)
	}
	want := map[string]bool{}
	for _, r := range strings.Split(*resources, ",") {
		switch r = strings.TrimSpace(r); r {
		case "listeners", "routes", "clusters", "extension_configs":
			want[r] = true
		case "":
		default:
			fmt.Fprintf(os.Stderr, "istio-render: unknown resource %q\n", r)
			os.Exit(2)
		}
	}

	data, err := readInputs(flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "istio-render: reading input:", err)
		os.Exit(2)
	}
	kubeObjs, istioYAML, err := splitInputs(data)
	if err != nil {
		fmt.Fprintln(os.Stderr, "istio-render:", err)
		os.Exit(2)
	}

	m, err := loadMeshConfig(*pf.meshFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "istio-render:", err)
		os.Exit(2)
	}

	t := &failer{verbose: *verbose}
	cid := cluster.ID(*pf.clusterID)

	// Istio's Kubernetes service registry, fed by a fake clientset holding the
	// Kubernetes objects from the input (as pilot/test/xds does).
	kubeRegistry, _ := kubecontroller.NewFakeControllerWithOptions(t, kubecontroller.FakeControllerOptions{
		Client:        kubelib.NewFakeClient(kubeObjs...),
		ClusterID:     cid,
		DomainSuffix:  *domainSuffix,
		MeshWatcher:   meshwatcher.NewTestWatcher(m),
		SkipRun:       true, // started by the harness's aggregate registry
		ConfigCluster: true,
	})

	cg := core.NewConfigGenTest(t, core.TestOptions{
		ConfigString:      istioYAML,
		MeshConfig:        m,
		ClusterID:         cid,
		ServiceRegistries: []serviceregistry.Instance{kubeRegistry},
	})

	id := pf.id()
	proxy := cg.SetupProxy(&model.Proxy{
		Type:            model.Router,
		ID:              id,
		ConfigNamespace: *pf.namespace,
		Labels:          lbls,
		IPAddresses:     []string{*pf.podIP},
		Metadata: &model.NodeMetadata{
			Namespace:    *pf.namespace,
			Labels:       lbls,
			ClusterID:    cid,
			IstioVersion: *pf.proxyVersion,
		},
	})

	mo := protojson.MarshalOptions{UseProtoNames: true}
	out := map[string]any{
		"istio": istioModuleVersion(),
	}
	targets := []string{}
	for _, st := range proxy.ServiceTargets {
		targets = append(targets, fmt.Sprintf("%s:%d->%d", st.Service.Hostname, st.Port.ServicePort.Port, st.Port.TargetPort))
	}
	sort.Strings(targets)
	out["proxy"] = map[string]any{
		"id": proxy.ID, "namespace": proxy.ConfigNamespace, "labels": proxy.Labels,
		"istioVersion": proxy.Metadata.IstioVersion, "serviceTargets": targets,
	}
	listeners := cg.Listeners(proxy)
	if want["listeners"] {
		if out["listeners"], err = marshalAll(mo, listeners); err != nil {
			t.Fatal("marshal listeners:", err)
		}
	}
	if want["routes"] {
		if out["routes"], err = marshalAll(mo, cg.RoutesFromListeners(proxy, listeners)); err != nil {
			t.Fatal("marshal routes:", err)
		}
	}
	if want["clusters"] {
		if out["clusters"], err = marshalAll(mo, cg.Clusters(proxy)); err != nil {
			t.Fatal("marshal clusters:", err)
		}
	}
	if want["extension_configs"] {
		// What istiod's ECDS generator answers for the filters the listeners discover
		// through config_discovery (EnvoyFilter EXTENSION_CONFIG patches).
		names, err := discoveredFilterNames(listeners)
		if err != nil {
			t.Fatal("reading config_discovery names:", err)
		}
		ecs := cg.ConfigGen.BuildExtensionConfiguration(proxy, cg.PushContext(), names, nil)
		if out["extension_configs"], err = marshalAll(mo, ecs); err != nil {
			t.Fatal("marshal extension configs:", err)
		}
		out["discovered_filters"] = names
	}

	var b []byte
	if *pretty {
		b, err = json.MarshalIndent(out, "", "  ")
	} else {
		b, err = json.Marshal(out)
	}
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, '\n')
	if *outFile != "" {
		err = os.WriteFile(*outFile, b, 0o644)
	} else {
		_, err = os.Stdout.Write(b)
	}
	if err != nil {
		t.Fatal(err)
	}
	// Do not run the harness cleanups: they only stop goroutines and wait for
	// queues to drain, which is pointless on exit.
	os.Exit(0)
}
