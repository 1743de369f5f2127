package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/gardener/gardener/pkg/extensions"
	healthchecker "github.com/gardener/gardener/pkg/utils/kubernetes/health/checker"
)

// runCare reads the Extension's ControlPlaneHealthy condition and the extension's heartbeat Lease
// as gardenlet's shoot care controller does (pkg/gardenlet/controller/shoot/care/health.go,
// getAllExtensionConditions and getLastHeartbeatTimeForExtension) and lets Gardener's
// HealthChecker.CheckExtensionCondition decide what the shoot's ControlPlaneHealthy condition
// becomes. Difference, named: gardenlet finds the heartbeat namespace through the
// ControllerInstallation (extension-<installation>), which lives in the garden cluster that is not
// run here; --heartbeat-namespace gives it directly.
func runCare(args []string) bool {
	fs := flag.NewFlagSet("care", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "seed kubeconfig")
	namespace := fs.String("namespace", "", "shoot namespace (technical ID)")
	extName := fs.String("extension", "acl", "Extension name")
	heartbeatNamespace := fs.String("heartbeat-namespace", "", "namespace of the extension's heartbeat Lease")
	// gardenlet chart default: staleExtensionHealthChecks enabled, threshold 5m (charts/gardener/gardenlet/values.yaml).
	threshold := fs.Duration("stale-threshold", 5*time.Minute, "staleExtensionHealthChecks threshold")
	_ = fs.Parse(args)

	c, err := seedClient(*kubeconfig)
	if !report("connect", time.Now(), err) {
		return false
	}
	ctx := context.Background()
	started := time.Now()
	ext := &extensionsv1alpha1.Extension{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: *namespace, Name: *extName}, ext); err != nil {
		return report("care-control-plane", started, err)
	}
	var heartbeat *metav1.MicroTime
	lease := &coordinationv1.Lease{}
	switch err := c.Get(ctx, client.ObjectKey{Namespace: *heartbeatNamespace, Name: extensions.HeartBeatResourceName}, lease); {
	case err == nil:
		heartbeat = lease.Spec.RenewTime
	case !apierrors.IsNotFound(err):
		return report("care-control-plane", started, err)
	}
	var reported []healthchecker.ExtensionCondition
	for _, condition := range ext.Status.Conditions {
		if condition.Type == gardencorev1beta1.ShootControlPlaneHealthy {
			reported = append(reported, healthchecker.ExtensionCondition{
				Condition:          condition,
				ExtensionType:      "Extension",
				ExtensionName:      ext.Name,
				ExtensionNamespace: ext.Namespace,
				LastHeartbeatTime:  heartbeat,
			})
		}
	}
	checker := healthchecker.NewHealthChecker(logr.Discard(), c, clock.RealClock{})
	initial := gardencorev1beta1.Condition{Type: gardencorev1beta1.ShootControlPlaneHealthy, Status: gardencorev1beta1.ConditionTrue}
	result := checker.CheckExtensionCondition(initial, reported, &metav1.Duration{Duration: *threshold})
	if result == nil {
		if len(reported) == 0 {
			return report("care-control-plane", started, fmt.Errorf("the Extension reports no %s condition", gardencorev1beta1.ShootControlPlaneHealthy))
		}
		return report("care-control-plane", started, nil)
	}
	return report("care-control-plane", started, fmt.Errorf("%s %s: %s", result.Status, result.Reason, result.Message))
}
