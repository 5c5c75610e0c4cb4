package reference

import "context"

type opNameKey struct{}

// WithOperation names the logical call made with ctx (resilience.operation.name): a low-cardinality
// class such as "catalog.read".
func WithOperation(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, opNameKey{}, name)
}

func operationFrom(ctx context.Context) string {
	s, _ := ctx.Value(opNameKey{}).(string)
	return s
}
