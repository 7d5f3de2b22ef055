// Command kstatus prints what the kstatus library (sigs.k8s.io/cli-utils/pkg/kstatus), which
// Flux and kpt wait with, computes for Kubernetes objects.
//
// It reads a stream of JSON objects on stdin (as `kubectl get -o json` and `kubectl get -w -o
// json` print them; a List counts as its items) and prints one JSON line per object, as soon as
// the object is read:
//
//	{"kind":"WorkflowGroup","name":"g","resourceVersion":"42","status":"InProgress","message":"..."}
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

// line is what is printed for one object.
type line struct {
	Kind            string `json:"kind"`
	Namespace       string `json:"namespace,omitempty"`
	Name            string `json:"name"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
	Status          string `json:"status"`
	Message         string `json:"message"`
}

func main() {
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "kstatus: %v\n", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer) error {
	decoder := json.NewDecoder(bufio.NewReader(in))
	encoder := json.NewEncoder(out)
	for {
		var raw json.RawMessage
		if err := decoder.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("reading an object: %w", err)
		}
		objects, err := items(raw)
		if err != nil {
			return err
		}
		for _, object := range objects {
			if err := encoder.Encode(compute(object)); err != nil {
				return err
			}
		}
	}
}

// items is the object in raw, or the items of a List. Each is decoded by apimachinery, as a
// client's are (integers stay int64: kstatus reads observedGeneration as one).
func items(raw json.RawMessage) ([]*unstructured.Unstructured, error) {
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("reading an object: %w", err)
	}
	if list.Items == nil {
		list.Items = []json.RawMessage{raw}
	}
	objects := make([]*unstructured.Unstructured, 0, len(list.Items))
	for _, item := range list.Items {
		object := &unstructured.Unstructured{}
		if err := object.UnmarshalJSON(item); err != nil {
			return nil, fmt.Errorf("decoding an object: %w", err)
		}
		objects = append(objects, object)
	}
	return objects, nil
}

func compute(object *unstructured.Unstructured) line {
	result := line{
		Kind:            object.GetKind(),
		Namespace:       object.GetNamespace(),
		Name:            object.GetName(),
		ResourceVersion: object.GetResourceVersion(),
	}
	computed, err := status.Compute(object)
	if err != nil {
		result.Status = "Error"
		result.Message = err.Error()
		return result
	}
	result.Status = string(computed.Status)
	result.Message = computed.Message
	return result
}
