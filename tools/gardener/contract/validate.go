package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	corevalidation "github.com/gardener/gardener/pkg/api/core/validation"
	operatorvalidation "github.com/gardener/gardener/pkg/api/operator/v1alpha1/validation"
	"github.com/gardener/gardener/pkg/apis/core"
	coreinstall "github.com/gardener/gardener/pkg/apis/core/install"
	operatorv1alpha1 "github.com/gardener/gardener/pkg/apis/operator/v1alpha1"
	gardendefaulting "github.com/gardener/gardener/pkg/operator/webhook/defaulting/garden"
)

// runValidate decodes every YAML document of the given files strictly (unknown or duplicate
// fields are errors, as with the API server's strict field validation), converts it to Gardener's
// internal version with defaulting, and runs Gardener's API validation for its kind. A Garden is
// defaulted and validated as gardener-operator's webhooks do, against the operator Extensions of
// the documents before it (its spec.extensions must name a type registered for the garden).
func runValidate(files []string) bool {
	scheme := runtime.NewScheme()
	coreinstall.Install(scheme)
	utilruntime.Must(operatorv1alpha1.AddToScheme(scheme))
	codecs := serializer.NewCodecFactory(scheme, serializer.EnableStrict)
	internal := codecs.UniversalDecoder()
	external := codecs.UniversalDeserializer()

	ok := true
	var registered []operatorv1alpha1.Extension
	for _, file := range files {
		data, err := os.ReadFile(file)
		if !report("read "+file, time.Now(), err) {
			ok = false
			continue
		}
		reader := utilyaml.NewYAMLReader(bytesReader(data))
		for i := 0; ; i++ {
			doc, err := reader.Read()
			if err == io.EOF {
				break
			}
			started := time.Now()
			step := fmt.Sprintf("%s#%d", file, i)
			if err != nil {
				ok = report(step, started, err) && ok
				break
			}
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			ok = report(step, started, validateDocument(doc, internal, external, &step, &registered)) && ok
		}
	}
	return ok
}

func validateDocument(doc []byte, internal, external runtime.Decoder, step *string, registered *[]operatorv1alpha1.Extension) error {
	obj, gvk, err := external.Decode(doc, nil, nil)
	if err != nil {
		return err
	}
	*step += " " + gvk.Kind
	var errs field.ErrorList
	switch typed := obj.(type) {
	case *operatorv1alpha1.Extension:
		errs = operatorvalidation.ValidateExtension(typed)
		*registered = append(*registered, *typed)
	case *operatorv1alpha1.Garden:
		if err := (&gardendefaulting.Handler{}).Default(context.Background(), typed); err != nil {
			return err
		}
		errs = operatorvalidation.ValidateGarden(typed, *registered)
	default:
		converted, _, err := internal.Decode(doc, nil, nil)
		if err != nil {
			return err
		}
		switch c := converted.(type) {
		case *core.ControllerRegistration:
			errs = corevalidation.ValidateControllerRegistration(c)
		case *core.ControllerDeployment:
			errs = corevalidation.ValidateControllerDeployment(c)
		default:
			return fmt.Errorf("no Gardener validation known for %s", gvk)
		}
	}
	return errs.ToAggregate()
}

func bytesReader(b []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(b)) }
