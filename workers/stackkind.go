package workers

import (
	"context"
	"fmt"
	"time"

	namespacepb "go.temporal.io/api/namespace/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// StackKindKey is the namespace data key under which an embedded server says which command serves it:
// "dev" (`temper dev`, up until stopped) or "demo" (`temper demo`, gone when its demo ends). Another
// demo reads it to decide whether it may run on that server (StackKindAt).
const StackKindKey = "temper.stack"

// markStackKind records kind on the namespace. Every start writes it, so a state file (temporal.db)
// first served by a demo and then by `temper dev` says "dev".
func markStackKind(ctx context.Context, c client.Client, namespace, kind string) error {
	_, err := c.WorkflowService().UpdateNamespace(ctx, &workflowservice.UpdateNamespaceRequest{
		Namespace:  namespace,
		UpdateInfo: &namespacepb.UpdateNamespaceInfo{Data: map[string]string{StackKindKey: kind}},
	})
	if err != nil {
		return fmt.Errorf("workers: mark namespace %s as served by temper %s: %w", namespace, kind, err)
	}
	return nil
}

// StackKindAt returns the StackKindKey of namespace on the server at addr: "dev", "demo", or "" for a
// server no Temper stack started (or one that does not answer within a few seconds).
func StackKindAt(addr, namespace string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{HostPort: addr, Namespace: namespace, Logger: quietLogger()})
	if err != nil {
		return ""
	}
	defer c.Close()
	resp, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
	if err != nil {
		return ""
	}
	return resp.GetNamespaceInfo().GetData()[StackKindKey]
}
