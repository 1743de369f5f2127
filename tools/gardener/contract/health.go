package main

import (
	"context"
	"flag"
	"os"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	resourcesv1alpha1 "github.com/gardener/gardener/pkg/apis/resources/v1alpha1"
	"github.com/gardener/gardener/pkg/utils/kubernetes/health"
)

var stderr = os.Stderr

// runHealth applies gardenlet's health checks (pkg/utils/kubernetes/health) to the stored
// Extension and ManagedResource, as gardenlet's shoot care controller does.
func runHealth(args []string) bool {
	fs := flag.NewFlagSet("health", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "seed kubeconfig")
	namespace := fs.String("namespace", "", "shoot namespace (technical ID)")
	extName := fs.String("extension", "acl", "Extension name (empty: skip)")
	mrName := fs.String("managed-resource", "", "ManagedResource name (empty: skip)")
	_ = fs.Parse(args)

	c, err := seedClient(*kubeconfig)
	if !report("connect", time.Now(), err) {
		return false
	}
	ctx := context.Background()
	ok := true
	if *extName != "" {
		started := time.Now()
		ext := &extensionsv1alpha1.Extension{}
		err := c.Get(ctx, client.ObjectKey{Namespace: *namespace, Name: *extName}, ext)
		if err == nil {
			err = health.CheckExtensionObject(ext)
		}
		ok = report("extension", started, err) && ok
	}
	if *mrName != "" {
		started := time.Now()
		mr := &resourcesv1alpha1.ManagedResource{}
		err := c.Get(ctx, client.ObjectKey{Namespace: *namespace, Name: *mrName}, mr)
		if err == nil {
			err = health.CheckManagedResource(mr)
		}
		ok = report("managed-resource", started, err) && ok
	}
	return ok
}
