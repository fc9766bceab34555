package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/acphub/acphub/internal/auth"
)

// tokensKey is the key of the token store's file in the PREFIX_AUTH
// bucket.
const tokensKey = "tokens"

// Tokens is the token store's file as every node of the cluster reads it
// (an auth.Backing): one key of the KV bucket PREFIX_AUTH, written with the
// revision it replaces, so that two nodes' changes never overwrite each
// other, and watched, so that a token revoked on one node stops working on
// every node at once.
type Tokens struct {
	kv     jetstream.KeyValue
	bucket string
}

// Tokens returns the cluster's token store file.
func (c *Cluster) Tokens() *Tokens { return &Tokens{kv: c.auth, bucket: c.prefixName + "_AUTH"} }

func (t *Tokens) String() string { return "the NATS bucket " + t.bucket }

// Load implements auth.Backing.
func (t *Tokens) Load() ([]byte, uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), pingWait*20)
	defer cancel()
	e, err := t.kv.Get(ctx, tokensKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	return e.Value(), e.Revision(), nil
}

// Save implements auth.Backing.
func (t *Tokens) Save(b []byte, version uint64) (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), pingWait*20)
	defer cancel()
	var rev uint64
	var err error
	if version == 0 {
		rev, err = t.kv.Create(ctx, tokensKey, b)
	} else {
		rev, err = t.kv.Update(ctx, tokensKey, b, version)
	}
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return 0, fmt.Errorf("%w: %w", auth.ErrStale, err)
	}
	return rev, err
}

// Watch implements auth.Backing.
func (t *Tokens) Watch(changed func([]byte, uint64)) (func(), error) {
	ctx, cancel := context.WithCancel(context.Background())
	w, err := t.kv.Watch(ctx, tokensKey, jetstream.UpdatesOnly())
	if err != nil {
		cancel()
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range w.Updates() {
			if e != nil && e.Operation() == jetstream.KeyValuePut {
				changed(e.Value(), e.Revision())
			}
		}
	}()
	return func() {
		cancel()
		_ = w.Stop()
		<-done
	}, nil
}
