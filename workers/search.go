package workers

import (
	"context"
	"fmt"
	"sort"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"

	"github.com/temperml/temper/workflows"
)

// SearchAttributes maps Temper's search attributes (workflows.SearchAttributeKeys) to their types, as
// a server registers them.
func SearchAttributes() map[string]enumspb.IndexedValueType {
	m := map[string]enumspb.IndexedValueType{}
	for _, k := range workflows.SearchAttributeKeys() {
		m[k.GetName()] = k.GetValueType()
	}
	return m
}

// SearchAttributeCommands are the Temporal CLI commands that register Temper's search attributes on
// an external cluster (docs/observability.md shows them; `temper ls` prints them when they are missing).
func SearchAttributeCommands(namespace string) []string {
	var out []string
	for _, k := range workflows.SearchAttributeKeys() {
		out = append(out, fmt.Sprintf("temporal operator search-attribute create --namespace %s --name %s --type %s",
			namespace, k.GetName(), cliType(k.GetValueType())))
	}
	return out
}

func cliType(t enumspb.IndexedValueType) string {
	return strings.TrimPrefix(t.String(), "INDEXED_VALUE_TYPE_")
}

// MissingSearchAttributes lists Temper's search attributes that namespace lacks, or has with another
// type ("TemperStep (registered as Keyword, want Int)").
func MissingSearchAttributes(ctx context.Context, c client.Client, namespace string) ([]string, error) {
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return nil, fmt.Errorf("workers: list search attributes of %s: %w", namespace, err)
	}
	var missing []string
	for name, want := range SearchAttributes() {
		got, ok := resp.GetCustomAttributes()[name]
		switch {
		case !ok:
			missing = append(missing, name)
		case got != want:
			missing = append(missing, fmt.Sprintf("%s (registered as %s, want %s)", name, cliType(got), cliType(want)))
		}
	}
	sort.Strings(missing)
	return missing, nil
}

// EnsureSearchAttributes registers those of Temper's search attributes that namespace lacks. The
// embedded server does it at start (its SQLite file may predate an attribute); on another cluster it
// needs operator rights, which workers do not assume.
func EnsureSearchAttributes(ctx context.Context, c client.Client, namespace string) error {
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("workers: list search attributes of %s: %w", namespace, err)
	}
	add := map[string]enumspb.IndexedValueType{}
	for name, t := range SearchAttributes() {
		if _, ok := resp.GetCustomAttributes()[name]; !ok {
			add[name] = t
		}
	}
	if len(add) == 0 {
		return nil
	}
	if _, err := c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: namespace, SearchAttributes: add,
	}); err != nil {
		return fmt.Errorf("workers: register search attributes in %s: %w", namespace, err)
	}
	return nil
}

// searchAttributesCheck is the local activity workflows.SearchAttributesName: whether the workflow's
// namespace has every Temper search attribute with its type. Workflows set them only then, since an
// upsert of an unregistered attribute fails the workflow task over and over.
func searchAttributesCheck(c client.Client) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		missing, err := MissingSearchAttributes(ctx, c, activity.GetInfo(ctx).WorkflowNamespace)
		if err != nil {
			return false, err
		}
		if len(missing) > 0 {
			activity.GetLogger(ctx).Warn("Temper search attributes missing: runs set none (see docs/observability.md)", "missing", strings.Join(missing, ", "))
		}
		return len(missing) == 0, nil
	}
}
