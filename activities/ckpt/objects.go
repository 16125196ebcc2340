package ckpt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
)

// Objects of a store that are not checkpoints (datasets, rollouts, rewards, reference log-probs) are
// read and written through the Client too, so that every activity shares the worker's one GCS client
// instead of opening a store (and a client) per call.

// Store returns the store rooted at the root URI; it shares the Client's GCS client, so closing it
// is not needed.
func (c *Client) Store(ctx context.Context, root string) (Store, error) {
	loc, err := parseLocation(root)
	if err != nil {
		return nil, err
	}
	return c.store(ctx, loc)
}

// ReadObject reads a whole object by its URI (file:///dir/name or gs://bucket/dir/name).
func (c *Client) ReadObject(ctx context.Context, uri string) ([]byte, error) {
	rc, err := c.OpenObject(ctx, uri)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return nil, fmt.Errorf("ckpt: read %s: %w", uri, err)
	}
	return b, nil
}

// OpenObject opens an object by its URI for streaming; the caller closes it.
func (c *Client) OpenObject(ctx context.Context, uri string) (io.ReadCloser, error) {
	dir, name := path.Split(strings.TrimSuffix(uri, "/"))
	st, err := c.Store(ctx, strings.TrimSuffix(dir, "/"))
	if err != nil {
		return nil, err
	}
	rc, err := st.Get(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("ckpt: read %s: %w", uri, err)
	}
	return rc, nil
}

// PutObject writes r at key under root and returns the object's URI.
func (c *Client) PutObject(ctx context.Context, root, key string, r io.Reader) (string, error) {
	st, err := c.Store(ctx, root)
	if err != nil {
		return "", err
	}
	if _, err := st.Put(ctx, key, r); err != nil {
		return "", fmt.Errorf("ckpt: write %s: %w", st.URI(key), err)
	}
	return st.URI(key), nil
}

// StatObject returns the URI of key under root and whether it exists.
func (c *Client) StatObject(ctx context.Context, root, key string) (string, bool, error) {
	st, err := c.Store(ctx, root)
	if err != nil {
		return "", false, err
	}
	if _, err := st.Stat(ctx, key); err == nil {
		return st.URI(key), true, nil
	} else if !errors.Is(err, ErrNotExist) {
		return "", false, fmt.Errorf("ckpt: stat %s: %w", st.URI(key), err)
	}
	return st.URI(key), false, nil
}
