package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	gardenerenvtest "github.com/gardener/gardener/test/envtest"
)

// runGarden starts a garden control plane the way Gardener's own integration tests do
// (test/envtest: kube-apiserver and etcd from --kube-assets, the real gardener-apiserver in
// process, registered through the aggregation layer), writes an admin kubeconfig, and serves
// until stdin closes or a signal arrives. Shoots are then validated by Gardener's own API code and
// by the admission webhooks registered in that kube-apiserver, as on a real garden cluster.
//
// The admission plugins that need a whole landscape (Project, CloudProfile, Seed, quotas, DNS,
// a ManagedSeed's gardenlet and seed configuration) are disabled, as Gardener's shootstate
// integration test does; API validation and the webhook admission chain stay on.
func runGarden(args []string) bool {
	fs := flag.NewFlagSet("garden", flag.ExitOnError)
	assets := fs.String("kube-assets", "", "directory with kube-apiserver and etcd")
	kubeconfigOut := fs.String("kubeconfig-out", "", "where to write the admin kubeconfig")
	_ = fs.Parse(args)

	started := time.Now()
	if err := os.Setenv("KUBEBUILDER_ASSETS", *assets); err != nil {
		return report("garden", started, err)
	}
	env := &gardenerenvtest.GardenerTestEnvironment{
		Environment: &envtest.Environment{},
		GardenerAPIServer: &gardenerenvtest.GardenerAPIServer{
			Args: []string{"--disable-admission-plugins=DeletionConfirmation,ResourceReferenceManager,ExtensionValidator,ShootQuotaValidator,ShootValidator,ShootTolerationRestriction,ShootDNS,ShootMutator,ManagedSeed"},
		},
	}
	cfg, err := env.Start()
	if err != nil {
		return report("garden", started, err)
	}
	defer func() { _ = env.Stop() }()

	kubeconfig := clientcmdapi.NewConfig()
	kubeconfig.Clusters["garden"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kubeconfig.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kubeconfig.Contexts["garden"] = &clientcmdapi.Context{Cluster: "garden", AuthInfo: "admin"}
	kubeconfig.CurrentContext = "garden"
	if err := clientcmd.WriteToFile(*kubeconfig, *kubeconfigOut); err != nil {
		return report("garden", started, err)
	}
	report("garden", started, nil)

	done := make(chan struct{})
	go func() {
		_, _ = bufio.NewReader(os.Stdin).ReadString(0)
		close(done)
	}()
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-done:
	case sig := <-signals:
		fmt.Fprintf(os.Stderr, "garden: %s\n", sig)
	}
	return true
}
