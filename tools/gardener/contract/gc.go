package main

import (
	"context"
	"flag"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	resourcemanagerconfigv1alpha1 "github.com/gardener/gardener/pkg/apis/config/resourcemanager/v1alpha1"
	"github.com/gardener/gardener/pkg/resourcemanager/controller/garbagecollector"
)

// runGarbageCollector runs one pass of gardener-resource-manager's garbage collector. The running
// resource manager spares every object younger than ten minutes (a constant in its add.go, not
// configurable); a test cannot wait that long, so this pass uses a minimum lifetime of zero and is
// otherwise Gardener's reconciler unchanged.
func runGarbageCollector(args []string) bool {
	fs := flag.NewFlagSet("gc", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "seed kubeconfig")
	_ = fs.Parse(args)

	c, err := seedClient(*kubeconfig)
	if !report("connect", time.Now(), err) {
		return false
	}
	zero := time.Duration(0)
	r := &garbagecollector.Reconciler{
		TargetClient:          c,
		Config:                resourcemanagerconfigv1alpha1.GarbageCollectorControllerConfig{Enabled: true, SyncPeriod: &metav1.Duration{Duration: time.Hour}},
		Clock:                 clock.RealClock{},
		MinimumObjectLifetime: &zero,
	}
	started := time.Now()
	_, err = r.Reconcile(context.Background(), reconcile.Request{})
	return report("gc", started, err)
}
