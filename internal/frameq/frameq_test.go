package frameq_test

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/acphub/acphub/internal/frameq"
)

func TestQueue_Bound(t *testing.T) {
	t.Parallel()
	q := frameq.New(3 * (10 + frameq.FrameOverhead))
	for i := range 3 {
		if _, err := q.Push(make([]byte, 10)); err != nil {
			t.Fatalf("push %d refused", i)
		}
	}
	if _, err := q.Push([]byte("x")); !errors.Is(err, frameq.ErrFull) {
		t.Fatalf("push over the bound = %v, want ErrFull", err)
	}
	got, err := q.Pop(nil)
	if err != nil || len(got) != 3 {
		t.Fatalf("Pop = %d frames, %v", len(got), err)
	}
	if n, err := q.Push([]byte("x")); err != nil || n != 1+frameq.FrameOverhead {
		t.Fatal("queue not emptied by Pop")
	}
}

func TestQueue_OrderAcrossGoroutines(t *testing.T) {
	t.Parallel()
	q := frameq.New(1 << 20)
	const n = 10000
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range n {
			for _, err := q.Push([]byte(fmt.Sprint(i))); err != nil; _, err = q.Push([]byte(fmt.Sprint(i))) {
			}
		}
		q.Close(nil)
	}()
	next := 0
	for {
		batch, err := q.Pop(nil)
		if errors.Is(err, frameq.ErrClosed) {
			break
		}
		for _, f := range batch {
			if got, want := string(f), fmt.Sprint(next); got != want {
				t.Fatalf("frame %q, want %q", got, want)
			}
			next++
		}
	}
	wg.Wait()
	if next != n {
		t.Fatalf("received %d frames, want %d", next, n)
	}
}

func TestQueue_CloseWithError(t *testing.T) {
	t.Parallel()
	q := frameq.New(1024)
	q.Push([]byte("a"))
	boom := errors.New("overflow")
	q.Close(boom)
	if _, err := q.Push([]byte("b")); !errors.Is(err, frameq.ErrClosed) {
		t.Errorf("push after close = %v, want ErrClosed", err)
	}
	if got, err := q.Pop(nil); err != nil || len(got) != 1 {
		t.Fatalf("Pop = %q, %v; want the queued frame", got, err)
	}
	if _, err := q.Pop(nil); !errors.Is(err, boom) {
		t.Fatalf("Pop after drain = %v, want %v", err, boom)
	}
	a := frameq.New(1024)
	a.Push([]byte("a"))
	a.Abort(boom)
	if _, err := a.Pop(nil); !errors.Is(err, boom) {
		t.Fatalf("Pop after Abort = %v, want %v", err, boom)
	}
}

func TestQueue_PopDone(t *testing.T) {
	t.Parallel()
	done := make(chan struct{})
	close(done)
	if _, err := frameq.New(1).Pop(done); !errors.Is(err, frameq.ErrClosed) {
		t.Fatalf("Pop = %v, want ErrClosed", err)
	}
}

// TestQueue_IdleHoldsNoFrame checks that once the consumer waits again, the
// queue no longer references the frames of the batch it handed out.
func TestQueue_IdleHoldsNoFrame(t *testing.T) {
	q := frameq.New(1 << 20)
	freed := make(chan struct{})
	frame := make([]byte, 4096)
	runtime.AddCleanup(&frame[0], func(struct{}) { close(freed) }, struct{}{})
	if _, err := q.Push(frame); err != nil {
		t.Fatal(err)
	}
	frame = nil
	if got, err := q.Pop(nil); err != nil || len(got) != 1 {
		t.Fatalf("Pop: %d frames, %v", len(got), err)
	}
	done := make(chan struct{})
	close(done)
	if _, err := q.Pop(done); !errors.Is(err, frameq.ErrClosed) {
		t.Fatalf("Pop after done: %v", err)
	}
	for range 20 {
		runtime.GC()
		select {
		case <-freed:
			runtime.KeepAlive(q)
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	runtime.KeepAlive(q)
	t.Fatal("the idle queue still holds the last batch's frame")
}

func TestQueue_PushOverIgnoresTheBound(t *testing.T) {
	t.Parallel()
	q := frameq.New(10 + frameq.FrameOverhead)
	if _, err := q.Push(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	n, err := q.PushOver(make([]byte, 100))
	if err != nil || n != 110+2*frameq.FrameOverhead {
		t.Fatalf("PushOver past the bound = %d, %v", n, err)
	}
	if _, err := q.Push([]byte("x")); !errors.Is(err, frameq.ErrFull) {
		t.Fatalf("Push while over the bound = %v, want ErrFull", err)
	}
	q.Close(nil)
	if _, err := q.PushOver([]byte("x")); !errors.Is(err, frameq.ErrClosed) {
		t.Fatalf("PushOver after Close = %v, want ErrClosed", err)
	}
}
