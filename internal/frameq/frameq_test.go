package frameq_test

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
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

// wire is a connection both the producer, through a Direct writer, and the
// consumer write to, under one lock, as the transports do; the direct
// writer takes some batches whole, leaves part of some (owed) and refuses
// others.
type wire struct {
	mu      sync.Mutex
	lines   []string
	owed    []string // what the direct writer left, for the consumer
	seen    int      // batches offered to direct
	largest int      // the most frames direct took at once
}

func (w *wire) direct(frames [][]byte) (taken, owed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen++
	var lines []string
	for _, f := range frames {
		lines = append(lines, string(f))
	}
	switch {
	case len(w.owed) > 0:
		return false, false // the consumer writes first
	case w.seen%7 == 0:
		return false, false // refused: queued
	case w.seen%5 == 0:
		w.owed = lines // all of it left for the consumer
		return true, true
	}
	w.lines = append(w.lines, lines...)
	w.largest = max(w.largest, len(lines))
	return true, false
}

func (w *wire) write(batch [][]byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines = append(w.lines, w.owed...)
	w.owed = nil
	for _, f := range batch {
		w.lines = append(w.lines, string(f))
	}
}

// TestQueue_DirectKeepsTheOrder pushes frames from one goroutine, some
// one at a time and some held and released eight at a time, while the
// consumer pops and writes from another: whether a frame went through the
// Direct writer, alone or with others, whole or in part, or through the
// queue, the wire has every frame once, in the order pushed, and the
// direct writer was used for several at once.
func TestQueue_DirectKeepsTheOrder(t *testing.T) {
	t.Parallel()
	q := frameq.New(64 << 20) // room for every frame: the order is the point, not the bound
	w := &wire{}
	q.SetDirect(w.direct)
	const n = 20000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			batch, err := q.Pop(nil)
			if errors.Is(err, frameq.ErrClosed) {
				w.write(nil)
				return
			}
			w.write(batch)
		}
	}()
	for i := range n {
		held := (i/8)%3 == 1
		if held && i%8 == 0 {
			q.Hold()
		}
		if _, err := q.Push([]byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
		if held && i%8 == 7 {
			q.Release()
		}
		if i%64 == 0 {
			runtime.Gosched() // let the consumer wait now and then
		}
	}
	q.Close(nil)
	<-done
	if len(w.lines) != n {
		t.Fatalf("%d frames on the wire, want %d", len(w.lines), n)
	}
	for i, l := range w.lines {
		if l != fmt.Sprint(i) {
			t.Fatalf("frame %d on the wire is %q", i, l)
		}
	}
	if q.Passed() == 0 || q.Pushed() != n || w.largest < 2 {
		t.Fatalf("Passed %d, Pushed %d, at most %d at once: want some frames passed, several at once, and all %d counted", q.Passed(), q.Pushed(), w.largest, n)
	}
}

// TestQueue_DirectOnlyWhileTheConsumerWaits: with no consumer waiting in
// Pop, frames queue; once it waits, a push goes to the Direct writer and
// Pop goes on waiting; a direct write that left bytes makes Pop return
// with no frames.
func TestQueue_DirectOnlyWhileTheConsumerWaits(t *testing.T) {
	t.Parallel()
	q := frameq.New(1 << 20)
	var direct []string
	owe := false
	q.SetDirect(func(frames [][]byte) (bool, bool) {
		for _, f := range frames {
			direct = append(direct, string(f))
		}
		return true, owe
	})
	q.Push([]byte("queued"))
	if got, _ := q.Pop(nil); len(got) != 1 || len(direct) != 0 {
		t.Fatalf("Pop = %q, direct %q: want the frame pushed before the consumer waited queued", got, direct)
	}
	popped := make(chan [][]byte)
	pop := func() {
		got, _ := q.Pop(nil)
		popped <- got
	}
	go pop()
	for len(direct) == 0 {
		// Until the consumer waits, the frame is queued and Pop returns it.
		time.Sleep(time.Millisecond)
		q.Push([]byte("x"))
		if len(direct) == 0 {
			if got := <-popped; len(got) != 1 {
				t.Fatalf("Pop = %q, want the frame queued before it waited", got)
			}
			go pop()
		}
	}
	select {
	case got := <-popped:
		t.Fatalf("Pop returned %q after a direct write that left nothing", got)
	case <-time.After(20 * time.Millisecond):
	}
	owe = true
	q.Push([]byte("owed"))
	if got := <-popped; len(got) != 0 {
		t.Fatalf("Pop = %q after a direct write that left bytes, want no frames", got)
	}
	if direct[len(direct)-1] != "owed" || q.Passed() != uint64(len(direct)) {
		t.Fatalf("direct %q, Passed %d", direct, q.Passed())
	}
}

// TestQueue_HeldFramesGoInOneWrite: frames pushed after Hold while the consumer
// waits do not wake it; Release gives them to the Direct writer at once,
// and the consumer goes on waiting. Without a consumer waiting, or past
// HoldMax, held frames queue and wake the consumer as Push does.
func TestQueue_HeldFramesGoInOneWrite(t *testing.T) {
	t.Parallel()
	q := frameq.New(1 << 20)
	var mu sync.Mutex
	var writes [][]string
	q.SetDirect(func(frames [][]byte) (bool, bool) {
		mu.Lock()
		defer mu.Unlock()
		var w []string
		for _, f := range frames {
			w = append(w, string(f))
		}
		writes = append(writes, w)
		return true, false
	})
	wrote := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(writes)
	}
	// Not waiting: held frames queue, and Pop has them.
	q.Hold()
	q.Push([]byte("a"))
	q.Release()
	if got, _ := q.Pop(nil); len(got) != 1 || wrote() != 0 {
		t.Fatalf("Pop = %q, %d direct writes: want the frame queued", got, wrote())
	}
	popped := make(chan [][]byte, 1)
	pop := func() {
		got, _ := q.Pop(nil)
		popped <- got
	}
	go pop()
	// Once a push goes direct, the consumer waits.
	for wrote() == 0 {
		time.Sleep(time.Millisecond)
		q.Push([]byte("probe"))
		if wrote() == 0 {
			<-popped
			go pop()
		}
	}
	q.Hold()
	q.Push([]byte("b"))
	q.PushOver([]byte("c"))
	q.Push([]byte("d"))
	select {
	case got := <-popped:
		t.Fatalf("Pop returned %q while the frames were held", got)
	case <-time.After(20 * time.Millisecond):
	}
	if n := wrote(); n != 1 {
		t.Fatalf("%d direct writes before Release, want the probe's alone", n)
	}
	q.Release()
	mu.Lock()
	last := writes[len(writes)-1]
	mu.Unlock()
	if fmt.Sprint(last) != "[b c d]" {
		t.Fatalf("Release wrote %q, want the three held frames in one write", last)
	}
	select {
	case got := <-popped:
		t.Fatalf("Pop returned %q after the held frames were written", got)
	case <-time.After(20 * time.Millisecond):
	}
	// Past HoldMax the consumer is woken, without Release, for what is
	// held.
	big := make([]byte, frameq.HoldMax/2)
	q.Hold()
	q.Push(big)
	q.Push(big)
	if got := <-popped; len(got) != 2 {
		t.Fatalf("Pop = %d frames past HoldMax, want 2", len(got))
	}
}

// TestQueue_ReleaseBesideTheNextPush releases held frames on one goroutine
// while the producer pushes its next frame on another, the Direct writer
// busy with the held frames meanwhile: whether the writer takes them or
// gives them back, the consumer gets the held frames, then the next one,
// none lost and none left waiting.
func TestQueue_ReleaseBesideTheNextPush(t *testing.T) {
	t.Parallel()
	for _, takes := range []bool{false, true} {
		t.Run(fmt.Sprintf("takes=%v", takes), func(t *testing.T) {
			t.Parallel()
			releaseBesideTheNextPush(t, takes)
		})
	}
}

func releaseBesideTheNextPush(t *testing.T, takes bool) {
	q := frameq.New(1 << 20)
	entered, refuse := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	var mu sync.Mutex
	var direct []string
	q.SetDirect(func(frames [][]byte) (bool, bool) {
		switch calls.Add(1) {
		case 1: // the probe below
			return true, false
		case 2: // Release's write: busy until the next push came
			close(entered)
			<-refuse
			if !takes {
				return false, false
			}
			mu.Lock()
			defer mu.Unlock()
			for _, f := range frames {
				direct = append(direct, string(f))
			}
			return true, false
		}
		return false, false
	})
	popped := make(chan [][]byte, 1)
	pop := func() {
		got, _ := q.Pop(nil)
		popped <- got
	}
	go pop()
	for calls.Load() == 0 {
		time.Sleep(time.Millisecond)
		q.Push([]byte("probe"))
		if calls.Load() == 0 {
			<-popped
			go pop()
		}
	}
	q.Hold()
	q.Push([]byte("a"))
	q.Push([]byte("b"))
	released := make(chan struct{})
	go func() {
		q.Release()
		close(released)
	}()
	<-entered
	if _, err := q.Push([]byte("c")); err != nil {
		t.Fatal(err)
	}
	// The consumer, woken for c, finds the writer busy and waits for it.
	time.Sleep(20 * time.Millisecond)
	close(refuse)
	<-released
	mu.Lock()
	got := direct
	mu.Unlock()
	for len(got) < 3 {
		var frames [][]byte
		select {
		case frames = <-popped:
		case <-time.After(10 * time.Second):
			t.Fatalf("the consumer got %q, then nothing", got)
		}
		for _, f := range frames {
			got = append(got, string(f))
		}
		if len(got) < 3 {
			go pop()
		}
	}
	if fmt.Sprint(got) != "[a b c]" {
		t.Fatalf("the frames went out as %q, want [a b c]", got)
	}
}
