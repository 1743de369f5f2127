package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/gardener/gardener/pkg/component/extensions/extension"
)

// runExtension drives one Extension through gardenlet's deployer
// (pkg/component/extensions/extension), step by step, with gardenlet's default wait interval,
// severe-error threshold and timeout unless overridden.
func runExtension(args []string) bool {
	fs := flag.NewFlagSet("extension", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "seed kubeconfig")
	namespace := fs.String("namespace", "", "shoot namespace (technical ID)")
	extType := fs.String("type", "acl", "extension type")
	providerConfig := fs.String("provider-config", "", "providerConfig as JSON (empty: none)")
	steps := fs.String("steps", "deploy,wait", "comma-separated: deploy, wait, destroy, wait-cleanup, migrate, wait-migrate, restore")
	timeout := fs.Duration("timeout", extension.DefaultTimeout, "Wait timeout (gardenlet: 3m)")
	interval := fs.Duration("interval", extension.DefaultInterval, "Wait poll interval (gardenlet: 5s)")
	severe := fs.Duration("severe-threshold", extension.DefaultSevereThreshold, "time after which a reported error is severe (gardenlet: 30s)")
	verbose := fs.Bool("v", false, "log the deployer's own messages to stderr")
	// gardener-operator deploys a Garden's extensions with this deployer too, with class garden and
	// the name prefix garden- (pkg/operator/controller/garden/garden/components.go newExtensions).
	class := fs.String("class", "", "Extension class (empty: none, as gardenlet; garden: as gardener-operator)")
	namePrefix := fs.String("name-prefix", "", "prefix of the Extension's name (gardener-operator: garden-)")
	_ = fs.Parse(args)

	c, err := seedClient(*kubeconfig)
	if !report("connect", time.Now(), err) {
		return false
	}
	var pc *runtime.RawExtension
	if *providerConfig != "" {
		pc = &runtime.RawExtension{Raw: []byte(*providerConfig)}
	}
	log := logr.Discard()
	if *verbose {
		log = funcr.New(func(prefix, args string) { fmt.Fprintln(stderr, prefix, args) }, funcr.Options{})
	}
	values := &extension.Values{
		Namespace: *namespace,
		Extensions: map[string]extension.Extension{
			*extType: {
				// gardenlet names each Extension after its type (pkg/component/shared.NewExtension).
				Extension: extensionsv1alpha1.Extension{
					ObjectMeta: metav1.ObjectMeta{Name: *extType, Namespace: *namespace},
					Spec: extensionsv1alpha1.ExtensionSpec{
						DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: *extType, ProviderConfig: pc},
					},
				},
				Timeout: *timeout,
			},
		},
	}
	if *class != "" {
		values.Class = ptr.To(extensionsv1alpha1.ExtensionClass(*class))
	}
	if *namePrefix != "" {
		values.NamePrefix = ptr.To(*namePrefix)
	}
	deployer := extension.New(log, c, values, *interval, *severe, *timeout)
	ctx := context.Background()
	for _, step := range strings.Split(*steps, ",") {
		started := time.Now()
		stepCtx, cancel := context.WithTimeout(ctx, *timeout+30*time.Second)
		err := runStep(stepCtx, deployer, step)
		cancel()
		if !report(step, started, err) {
			return false
		}
	}
	return true
}

func runStep(ctx context.Context, d extension.Interface, step string) error {
	switch step {
	case "deploy":
		return d.Deploy(ctx)
	case "wait":
		return d.Wait(ctx)
	case "destroy":
		return d.Destroy(ctx)
	case "wait-cleanup":
		return d.WaitCleanup(ctx)
	case "migrate":
		if err := d.MigrateBeforeKubeAPIServer(ctx); err != nil {
			return err
		}
		return d.MigrateAfterKubeAPIServer(ctx)
	case "wait-migrate":
		if err := d.WaitMigrateBeforeKubeAPIServer(ctx); err != nil {
			return err
		}
		return d.WaitMigrateAfterKubeAPIServer(ctx)
	case "restore":
		// gardenlet restores from the ShootState; the acl extension keeps no state there.
		return d.RestoreAfterKubeAPIServer(ctx, &gardencorev1beta1.ShootState{})
	default:
		return fmt.Errorf("unknown step %q", step)
	}
}
