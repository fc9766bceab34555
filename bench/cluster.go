package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The cluster section: hubs on a NATS JetStream server (docs/cluster.md),
// against a single hub with its SQLite log, in the same run.

// clusterResult is the cluster section's figures.
type clusterResult struct {
	size int
	// The runs of one client prompting: on a single hub (SQLite), then,
	// for each set of NATS servers, on a node with the NATS store and
	// through another node that forwards it to that one.
	single clusterRow
	stores []storeRows
	// failover is, by lease TTL, the time from a kill -9 of the node that
	// runs a session to the answer of a prompt sent through another node,
	// on one NATS server.
	failover []failoverResult
	// scale is the scale section's run at the largest S up to
	// clusterScaleSessions, on a single hub and on a node of one NATS
	// server.
	scale [2]*scaleResult
}

// clusterScaleSessions bounds the sessions of the cluster section's scale
// runs.
const clusterScaleSessions = 100

// storeRows are the runs on one set of NATS servers.
type storeRows struct {
	servers          int // each stream has as many replicas
	owner, forwarded clusterRow
	// fanOwner and fanForwarded are clusterFanOut clients of the session,
	// all on the node that runs it, then all on the other node.
	fanOwner, fanForwarded clusterRow
}

// clusterFanOut is how many clients of one session the fan-out rows have.
const clusterFanOut = 20

type clusterRow struct {
	paced, flood *floodResult
	prompt       latencies // /echo x round trips
}

type failoverResult struct {
	ttl  time.Duration
	took []time.Duration // one per run, sorted
}

// failoverRuns is how many kills each TTL's failover figure is the median of.
const failoverRuns = 3

// natsServers are NATS servers with JetStream in one cluster, run from the
// nats-server module this module requires.
type natsServers struct {
	cmds     []*exec.Cmd
	url      string // every server's, comma-separated
	replicas int    // the replicas of the streams hubs make on them
}

// startNATS builds nats-server into dir, once, and runs n servers in one
// cluster on free loopback ports, their stores in dir.
func startNATS(dir string, n int) (*natsServers, error) {
	bin := filepath.Join(dir, "nats-server")
	if _, err := os.Stat(bin); err != nil {
		cmd := exec.Command("go", "build", "-o", bin, "github.com/nats-io/nats-server/v2")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("go build nats-server: %w", err)
		}
	}
	clients, routes := make([]string, n), make([]string, n)
	for i := range n {
		var err error
		if clients[i], err = freePort(); err != nil {
			return nil, err
		}
		if routes[i], err = freePort(); err != nil {
			return nil, err
		}
	}
	s := &natsServers{replicas: n}
	for i := range n {
		store, err := os.MkdirTemp(dir, "nats-")
		if err != nil {
			return nil, err
		}
		_, port, _ := net.SplitHostPort(clients[i])
		args := []string{"-a", "127.0.0.1", "-p", port, "-js", "-sd", store, "-n", fmt.Sprintf("n%d", i+1)}
		if n > 1 {
			var others []string
			for j, r := range routes {
				if j != i {
					others = append(others, "nats://"+r)
				}
			}
			args = append(args, "--cluster_name", "bench", "--cluster", "nats://"+routes[i], "--routes", strings.Join(others, ","))
		}
		cmd := exec.Command(bin, args...)
		if err := cmd.Start(); err != nil {
			s.stop()
			return nil, err
		}
		s.cmds = append(s.cmds, cmd)
		if s.url != "" {
			s.url += ","
		}
		s.url += "nats://" + clients[i]
	}
	for _, addr := range clients {
		if err := awaitListener(addr); err != nil {
			s.stop()
			return nil, err
		}
	}
	return s, nil
}

// awaitJetStream waits until the servers of s answer JetStream's API — a
// cluster has elected its leader — by asking them the cluster's status
// with bin, an acphub binary.
func (s *natsServers) awaitJetStream(bin string) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := exec.Command(bin, "cluster", "status", "--store", s.url, "--config", os.DevNull).CombinedOutput()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("JetStream did not answer within 60 s: %s", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// awaitListener waits until something listens on addr.
func awaitListener(addr string) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nats-server did not listen on %s within 20 s: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *natsServers) stop() {
	for _, cmd := range s.cmds {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}

// node starts a hub that is the node name of the cluster on s.
func (c *config) node(s *natsServers, name string, ttl time.Duration) (*hubProc, error) {
	return c.startHub("--store", s.url, "--node", name, "--lease-ttl", ttl.String(), "--nats-replicas", strconv.Itoa(s.replicas))
}

func runCluster(cfg *config) (*clusterResult, error) {
	res := &clusterResult{size: 100}
	// spec is the flood of k clients: with many, each chunk its own event
	// (stampMeta), as the fan-out section's, so that a client that reads
	// the log counts every chunk.
	spec := func(paced bool, k int) floodSpec {
		mode := cfg.modes[0]
		if k > 1 {
			mode = stampMeta
		}
		if paced {
			return floodSpec{n: cfg.pacedN, size: res.size, rate: cfg.pacedRate, mode: mode}
		}
		return floodSpec{n: cfg.floodN(k, res.size), size: res.size, mode: mode}
	}
	// measure runs the rows' runs with client c of a session whose hub is
	// proc.
	// measure runs the row's runs with clients cs of a session whose hub
	// is h, the first prompting; with one client, the prompt round trips
	// too. With -profile, h's CPU profile of the first 2 s of the flood
	// is written as cpu-cluster-NAME.pprof.
	measure := func(row *clusterRow, h *hubProc, name string, cs ...*client) error {
		fr := &floodRun{proc: h.pid, clients: cs}
		for i := range cs {
			fr.readers = append(fr.readers, i)
		}
		warm := spec(false, len(cs))
		warm.n = warmupChunks
		if _, err := fr.run(warm); err != nil {
			return err
		}
		var err error
		if len(cs) == 1 {
			if row.prompt, err = echoRTT(cs[0], cfg.rtts); err != nil {
				return err
			}
		}
		if row.paced, err = fr.run(spec(true, len(cs))); err != nil {
			return err
		}
		profiled := cfg.profile(h, "cpu-cluster-"+name+".pprof", "profile?seconds=2")
		row.flood, err = fr.run(spec(false, len(cs)))
		if perr := profiled(); perr != nil {
			cfg.progress("profile: %v", perr)
		}
		return err
	}

	if err := withHub(cfg, 1, func(h *hubProc, clients []*client) error {
		return measure(&res.single, h, "single", clients[0])
	}); err != nil {
		return nil, fmt.Errorf("single hub: %w", err)
	}
	for _, servers := range []int{1, 3} {
		rows, err := runStore(cfg, servers, measure)
		if err != nil {
			return nil, fmt.Errorf("%d NATS servers: %w", servers, err)
		}
		cfg.progress("cluster, %d NATS servers: paced p50 %v single, %v on the node, %v forwarded; flood %.0f/s, %.0f/s, %.0f/s", servers,
			res.single.paced.lat.p50, rows.owner.paced.lat.p50, rows.forwarded.paced.lat.p50,
			res.single.flood.minRate(), rows.owner.flood.minRate(), rows.forwarded.flood.minRate())
		res.stores = append(res.stores, rows)
	}
	s, err := startNATS(cfg.tmp, 1)
	if err != nil {
		return nil, err
	}
	defer s.stop()
	if err := s.awaitJetStream(cfg.bin); err != nil {
		return nil, err
	}
	n := 0
	for _, k := range cfg.sessions {
		if k <= clusterScaleSessions {
			n = max(n, k)
		}
	}
	if n > 0 {
		if res.scale[0], err = runScale(cfg, n); err != nil {
			return nil, fmt.Errorf("scale S=%d, single hub: %w", n, err)
		}
		if res.scale[1], err = runScale(cfg, n, "--store", s.url, "--node", "scale"); err != nil {
			return nil, fmt.Errorf("scale S=%d, a node on NATS: %w", n, err)
		}
	}
	for _, ttl := range []time.Duration{2 * time.Second, 10 * time.Second} {
		f := failoverResult{ttl: ttl}
		for i := range failoverRuns {
			took, err := failover(cfg, s, ttl, fmt.Sprintf("failover-%s-%d", ttl, i))
			if err != nil {
				return nil, fmt.Errorf("failover, TTL %s: %w", ttl, err)
			}
			f.took = append(f.took, took)
		}
		slices.Sort(f.took)
		cfg.progress("cluster: failover with a lease TTL of %s: median %v", ttl, f.took[len(f.took)/2])
		res.failover = append(res.failover, f)
	}
	return res, nil
}

// runStore measures, on n NATS servers, a client on the node that runs its
// session and one that another node forwards.
func runStore(cfg *config, n int, measure func(row *clusterRow, h *hubProc, name string, cs ...*client) error) (storeRows, error) {
	rows := storeRows{servers: n}
	s, err := startNATS(cfg.tmp, n)
	if err != nil {
		return rows, err
	}
	defer s.stop()
	if err := s.awaitJetStream(cfg.bin); err != nil {
		return rows, err
	}
	a, err := cfg.node(s, "a", 10*time.Second)
	if err != nil {
		return rows, err
	}
	defer a.stop()
	b, err := cfg.node(s, "b", 10*time.Second)
	if err != nil {
		return rows, err
	}
	defer b.stop()
	onA, _, err := joinClients(a, "bench", 1)
	if err != nil {
		return rows, err
	}
	defer closeAll(onA)
	if err := measure(&rows.owner, a, fmt.Sprintf("%d-owner", n), onA[0]); err != nil {
		return rows, fmt.Errorf("a client on the node that runs the session: %w", err)
	}
	closeAll(onA) // the forwarded client is measured alone
	onB, err := joinAs(b, "bench", "far")
	if err != nil {
		return rows, err
	}
	defer closeAll([]*client{onB})
	if err := measure(&rows.forwarded, a, fmt.Sprintf("%d-forwarded", n), onB); err != nil {
		return rows, fmt.Errorf("a client forwarded by another node: %w", err)
	}
	closeAll([]*client{onB})

	// The fan-out: many clients of a new session a runs, on a, then on b,
	// whose node gets the session's frames once for all of them. (A new
	// session: a client that joins one with turns is given them first.)
	fan := func(h *hubProc, key string) ([]*client, error) {
		opener, err := joinAs(a, key, "opener") // a runs it
		if err != nil {
			return nil, err
		}
		closeAll([]*client{opener})
		var cs []*client
		for i := range clusterFanOut {
			c, err := joinAs(h, key, fmt.Sprintf("c%d", i))
			if err != nil {
				closeAll(cs)
				return nil, err
			}
			cs = append(cs, c)
		}
		return cs, nil
	}
	for _, f := range []struct {
		h    *hubProc
		row  *clusterRow
		name string
	}{{a, &rows.fanOwner, "fan-a"}, {b, &rows.fanForwarded, "fan-b"}} {
		cs, err := fan(f.h, f.name)
		if err != nil {
			return rows, err
		}
		err = measure(f.row, a, fmt.Sprintf("%d-%s", n, f.name), cs...)
		closeAll(cs)
		if err != nil {
			return rows, fmt.Errorf("%d clients %s: %w", clusterFanOut, f.name, err)
		}
	}
	return rows, nil
}

// failover measures one failover of session key: a node runs it (its
// agent started, its ACP session made), and is killed with kill -9; the clock runs from the kill to the answer of a
// prompt a client sends through another node, which waits for the lease to
// run out, takes the session and starts its agent.
func failover(cfg *config, s *natsServers, ttl time.Duration, key string) (time.Duration, error) {
	a, err := cfg.node(s, "a-"+key, ttl)
	if err != nil {
		return 0, err
	}
	defer a.stop()
	b, err := cfg.node(s, "b-"+key, ttl)
	if err != nil {
		return 0, err
	}
	defer b.stop()
	onA, _, err := joinClients(a, key, 1)
	if err != nil {
		return 0, err
	}
	defer closeAll(onA)
	a.kill()
	killed := time.Now()
	onB, err := joinAs(b, key, "far")
	if err != nil {
		return 0, err
	}
	defer closeAll([]*client{onB})
	if _, err := echoRTT(onB, 1); err != nil {
		return 0, err
	}
	return time.Since(killed), nil
}

// joinAs connects a client to session key of h as peer, with initialize
// and session/new.
func joinAs(h *hubProc, key, peer string) (*client, error) {
	t, err := dial(h, key, peer)
	if err != nil {
		return nil, err
	}
	c := &client{name: peer, t: t}
	if err := c.handshake(); err != nil {
		t.close()
		return nil, err
	}
	return c, nil
}

// clusterSection writes the cluster section.
func (r *report) clusterSection(p func(string, ...any)) {
	c := r.cluster
	p("### Cluster: hubs on NATS JetStream\n\n")
	p("One client prompting on session `bench`, S=%d B, `%s`: on a single hub with its SQLite log; on node a of a cluster "+
		"whose log is on NATS JetStream (`nats-server -js`, processes on this machine built from the module acphub requires: one, then three in one cluster with streams of three replicas); "+
		"and on node b, which forwards it to a (docs/cluster.md). Each ratio is to the single hub of this run.\n\n", c.size, r.cfg.modes[0].command())
	p("| where the client is | prompt round trip p50 / p99 / max | paced %d/s p50 / p99 / max | paced p50 ÷ single | flood | flood ÷ single |\n", r.cfg.pacedRate)
	p("|---|---:|---:|---:|---:|---:|\n")
	row := func(name string, row clusterRow) {
		p("| %s | %s | %s | %.2f× | %.0f/s | %.2f× |\n", name, lats(row.prompt), lats(row.paced.lat),
			float64(row.paced.lat.p50)/float64(c.single.paced.lat.p50),
			row.flood.minRate(), row.flood.minRate()/c.single.flood.minRate())
	}
	row("single hub, SQLite", c.single)
	for _, st := range c.stores {
		where := "1 NATS server"
		if st.servers > 1 {
			where = fmt.Sprintf("%d NATS servers, replicas %d", st.servers, st.servers)
		}
		row("node a, which runs the session ("+where+")", st.owner)
		row("node b, forwarded to a ("+where+")", st.forwarded)
	}
	p("\nThe fan-out: %d clients of the session, all on node a, which runs it, then all on node b, which gets the session's frames from a once for all of them (docs/cluster.md, one fan-out per node). Paced latency and the slowest client's flood rate; each ratio is to the %d clients on a of the same servers.\n\n", clusterFanOut, clusterFanOut)
	p("| NATS servers | where the %d clients are | paced %d/s p50 / p99 / max | paced p50 ÷ on a | slowest client's flood (%d chunks) | flood ÷ on a | lost / dup / reordered | node a's CPU in the flood |\n|---:|---|---:|---:|---:|---:|---:|---:|\n", clusterFanOut, r.cfg.pacedRate, r.cfg.floodN(clusterFanOut, c.size))
	for _, st := range c.stores {
		for _, f := range []struct {
			name string
			row  clusterRow
		}{{"node a", st.fanOwner}, {"node b, forwarded", st.fanForwarded}} {
			fl := f.row.flood
			p("| %d | %s | %s | %.2f× | %.0f/s | %.2f× | %s | %.2f |\n", st.servers, f.name, lats(f.row.paced.lat),
				float64(f.row.paced.lat.p50)/float64(st.fanOwner.paced.lat.p50),
				fl.minRate(), fl.minRate()/st.fanOwner.flood.minRate(), errCounts(fl.lost, fl.dup, fl.reorder, fl.bad), fl.hubCPU)
		}
	}
	if sc := c.scale; sc[0] != nil {
		p("\nSessions per node: the scale section's run (one session in %d streaming `%s`, three clients a session; see Scale) with S = %d, on a single hub and on a node whose log is on one NATS server.\n\n", scaleEvery, scaleSpec.prompt(), sc[0].sessions)
		p("| S | store | latency p50 / p99 / max | p50 ÷ single | lost / dup / reordered | hub CPU per delivered chunk | hub CPU | peak RSS | start-up with S sessions |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|\n")
		for i, s := range sc {
			p("| %d | %s | %s | %.2f× | %s | %s | %.2f | %s | %s |\n", s.sessions, []string{"SQLite, single hub", "NATS, cluster node"}[i], lats(s.lat),
				float64(s.lat.p50)/float64(sc[0].lat.p50), errCounts(s.lost, s.dup, s.reorder, s.bad), micros(s.perChunk), s.hubCores, mib(s.rssPeak), dur(s.restart))
		}
	}
	p("\n| lease TTL | failover on 1 NATS server: kill -9 of the running node → a prompt through another node answered (median of %d; min, max) |\n|---:|---:|\n", failoverRuns)
	for _, f := range c.failover {
		p("| %s | %s (%s, %s) |\n", f.ttl, dur(f.took[len(f.took)/2]), dur(f.took[0]), dur(f.took[len(f.took)-1]))
	}
	p("\n")
}
