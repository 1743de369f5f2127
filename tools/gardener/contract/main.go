// gardener-contract runs Gardener's own code against a kube-apiserver so that Gardener, not our
// reading of it, judges the extension contract in the tests (test/gardener/). Every subcommand
// calls a gardener/gardener package as gardenlet or gardener-resource-manager call it; the only
// settings that differ are named where they are set, with the reason.
//
//	gardener-contract extension --kubeconfig K --namespace NS --steps deploy,wait[,...]
//	    [--provider-config JSON] [--timeout 3m] [--interval 5s] [--severe-threshold 30s]
//	gardener-contract health --kubeconfig K --namespace NS [--extension acl] [--managed-resource NAME]
//	gardener-contract care --kubeconfig K --namespace NS --heartbeat-namespace NS [--stale-threshold 5m]
//	gardener-contract garden --kube-assets DIR --kubeconfig-out FILE   (serves until stdin closes)
//	gardener-contract gc --kubeconfig K
//	gardener-contract validate FILE...
//
// Each step prints one JSON line {"step","ok","error","ms"}; the exit code is 1 if any failed.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	v1beta1helper "github.com/gardener/gardener/pkg/api/core/v1beta1/helper"
	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
)

type stepResult struct {
	Step  string `json:"step"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	// Codes are the Gardener error codes the error carries, as gardenlet extracts them for the
	// shoot's status (ERR_CONFIGURATION_PROBLEM makes gardenlet stop retrying the shoot).
	Codes []gardencorev1beta1.ErrorCode `json:"codes,omitempty"`
	Ms    int64                         `json:"ms"`
}

func report(step string, started time.Time, err error) bool {
	r := stepResult{Step: step, OK: err == nil, Ms: time.Since(started).Milliseconds()}
	if err != nil {
		r.Error = err.Error()
		r.Codes = v1beta1helper.ExtractErrorCodes(err)
	}
	line, _ := json.Marshal(r)
	fmt.Println(string(line))
	return err == nil
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: gardener-contract extension|health|care|garden|gc|validate ...")
		os.Exit(2)
	}
	var ok bool
	switch os.Args[1] {
	case "extension":
		ok = runExtension(os.Args[2:])
	case "health":
		ok = runHealth(os.Args[2:])
	case "care":
		ok = runCare(os.Args[2:])
	case "garden":
		ok = runGarden(os.Args[2:])
	case "gc":
		ok = runGarbageCollector(os.Args[2:])
	case "validate":
		ok = runValidate(os.Args[2:])
	default:
		fmt.Fprintf(os.Stderr, "unknown subcommand %q\n", os.Args[1])
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}
