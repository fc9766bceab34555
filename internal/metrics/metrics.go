// Package metrics serves acphub's Prometheus metrics (docs/metrics.md):
// what its parts count through a meter.Sink, and what it reads at each
// scrape from the hub-wide session stream (sessions by state, what agents
// say they cost) and the exporters (their lag).
package metrics

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/meter"
)

// Sources are what a scrape reads besides the counts.
type Sources struct {
	Sessions  func() []api.SessionSummary // the sessions as the session stream has them
	Exporters func() []api.ExporterStatus // nil: no exporters
}

// Node is a cluster node's part of the cluster (docs/cluster.md).
type Node struct {
	Leases     int   // sessions whose lease the node holds: the sessions it runs
	LeasesLost int64 // leases it lost since it started
	// Forwarded clients: the links the node holds for clients it reached
	// (Reached), and serves for the sessions it runs (Served).
	Reached, Served int
}

// Metrics is a meter.Sink that Prometheus scrapes.
type Metrics struct {
	reg  *prometheus.Registry
	src  Sources
	node func() Node // nil: the hub is no cluster's node

	frames       *prometheus.CounterVec
	frameBytes   *prometheus.CounterVec
	clients      *prometheus.GaugeVec
	disconnects  *prometheus.CounterVec
	prompt       prometheus.Histogram
	permission   prometheus.Histogram
	logAppend    prometheus.Histogram
	logCommit    prometheus.Histogram
	logCommitted prometheus.Counter
	replay       prometheus.Histogram
	toolCalls    *prometheus.CounterVec
	gitOps       *prometheus.CounterVec
	gitFailures  *prometheus.CounterVec
	agentStarts  prometheus.Counter
	agentRestart prometheus.Counter
	resumes      *prometheus.CounterVec

	mu     sync.Mutex // guards queues
	queues map[string]queue
}

type queue struct {
	bytes   int64
	lagging int
}

var _ meter.Sink = (*Metrics)(nil)

// Latency buckets, in seconds: 100 µs to a minute.
var latencyBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// New returns the metrics of a hub that reads src at each scrape.
func New(src Sources) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), src: src, queues: make(map[string]queue)}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	histogram := func(name, help string) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: latencyBuckets})
	}
	m.frames = counter("acphub_frames_total", "JSON-RPC frames the hub received (direction in: from clients and agents) and sent to clients (out), by method.", "direction", "method")
	m.frameBytes = counter("acphub_frame_bytes_total", "Bytes of those frames.", "direction")
	m.clients = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "acphub_clients", Help: "Connected clients, by their token's role and their transport."}, []string{"role", "transport"})
	m.disconnects = counter("acphub_disconnects_total", "Clients that left a session or that the hub disconnected, by reason (left, or the condition: backpressure, unauthenticated, session_deleted, temporarily_unavailable).", "reason")
	m.prompt = histogram("acphub_prompt_duration_seconds", "Prompt round trips: session/prompt to its answer, the turn.")
	m.permission = histogram("acphub_permission_duration_seconds", "Permission round trips: the agent's request to the answer it got.")
	m.logAppend = histogram("acphub_log_append_duration_seconds", "Session log appends: a batch of events handed to the store.")
	m.logCommit = histogram("acphub_log_commit_duration_seconds", "Session log commits: a transaction written and synced to disk.")
	m.logCommitted = prometheus.NewCounter(prometheus.CounterOpts{Name: "acphub_log_committed_events_total", Help: "Events committed to the session log."})
	m.replay = histogram("acphub_replay_duration_seconds", "History replays: a stretch of a session's log read to a client, from its first page to its last.")
	m.toolCalls = counter("acphub_client_tool_calls_total", "Agents' client-tool requests (fs/*, terminal/*), by namespace, the policy mode, the decision and the outcome.", "namespace", "mode", "decision", "outcome")
	m.gitOps = counter("acphub_git_operations_total", "Git operations of remote sessions, by operation.", "op")
	m.gitFailures = counter("acphub_git_failures_total", "Git operations of remote sessions that failed, by operation.", "op")
	m.agentStarts = prometheus.NewCounter(prometheus.CounterOpts{Name: "acphub_agent_starts_total", Help: "Agent processes started."})
	m.agentRestart = prometheus.NewCounter(prometheus.CounterOpts{Name: "acphub_agent_restarts_total", Help: "Agent processes started for a session that had one before (after an exit, a crash, an idle stop or a hub restart)."})
	m.resumes = counter("acphub_resumes_total", "Resumable connections: resumed, and fenced (an older connection a resume ended).", "result")
	m.reg.MustRegister(m.frames, m.frameBytes, m.clients, m.disconnects, m.prompt, m.permission, m.logAppend, m.logCommit, m.logCommitted,
		m.replay, m.toolCalls, m.gitOps, m.gitFailures, m.agentStarts, m.agentRestart, m.resumes,
		scraped{m}, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// ServeNode adds the metrics of a cluster's node, which node reads at each
// scrape. Call it before the metrics are served.
func (m *Metrics) ServeNode(node func() Node) { m.node = node }

// Handler serves the metrics in Prometheus' text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Frames implements meter.Sink.
func (m *Metrics) Frames(direction, method string, frames, bytes int) {
	m.frames.WithLabelValues(direction, method).Add(float64(frames))
	m.frameBytes.WithLabelValues(direction).Add(float64(bytes))
}

// Disconnected implements meter.Sink.
func (m *Metrics) Disconnected(reason string) { m.disconnects.WithLabelValues(reason).Inc() }

// TurnEnded implements meter.Sink.
func (m *Metrics) TurnEnded(d time.Duration) { m.prompt.Observe(d.Seconds()) }

// PermissionResolved implements meter.Sink.
func (m *Metrics) PermissionResolved(d time.Duration) { m.permission.Observe(d.Seconds()) }

// AgentStarted implements meter.Sink.
func (m *Metrics) AgentStarted(restart bool) {
	m.agentStarts.Inc()
	if restart {
		m.agentRestart.Inc()
	}
}

// ToolCall implements meter.Sink.
func (m *Metrics) ToolCall(ev *api.ClientToolCall) {
	m.toolCalls.WithLabelValues(ev.Namespace, ev.Mode, ev.Decision, ev.Outcome).Inc()
}

// Replayed implements meter.Sink.
func (m *Metrics) Replayed(d time.Duration) { m.replay.Observe(d.Seconds()) }

// Queues implements meter.Sink.
func (m *Metrics) Queues(session string, queued int64, lagging int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if queued == 0 && lagging == 0 {
		delete(m.queues, session)
		return
	}
	m.queues[session] = queue{queued, lagging}
}

// Backlog returns the bytes queued for the clients and subscribers of
// every session, and how many of them read from the log (see Queues).
func (m *Metrics) Backlog() (queued int64, readingLog int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, q := range m.queues {
		queued += q.bytes
		readingLog += q.lagging
	}
	return queued, readingLog
}

// LogAppended implements meter.Sink.
func (m *Metrics) LogAppended(d time.Duration) { m.logAppend.Observe(d.Seconds()) }

// LogCommitted implements meter.Sink.
func (m *Metrics) LogCommitted(d time.Duration, n int) {
	m.logCommit.Observe(d.Seconds())
	m.logCommitted.Add(float64(n))
}

// Git implements meter.Sink.
func (m *Metrics) Git(op string, failed bool) {
	m.gitOps.WithLabelValues(op).Inc()
	if failed {
		m.gitFailures.WithLabelValues(op).Inc()
	}
}

// Connected implements meter.Sink.
func (m *Metrics) Connected(role, transport string) func() {
	g := m.clients.WithLabelValues(role, transport)
	g.Inc()
	var once sync.Once
	return func() { once.Do(g.Dec) }
}

// Resumed implements meter.Sink.
func (m *Metrics) Resumed(result string) { m.resumes.WithLabelValues(result).Inc() }

// scraped are the metrics read at each scrape.
type scraped struct{ m *Metrics }

var (
	sessionsDesc    = prometheus.NewDesc("acphub_sessions", "Sessions, by state (idle, running, requires_action, agent_exited, stopped).", []string{"state"}, nil)
	waitingDesc     = prometheus.NewDesc("acphub_requests_waiting", "Agent requests waiting for a person (permissions, elicitations), over every session.", nil, nil)
	queuedDesc      = prometheus.NewDesc("acphub_client_queue_bytes", "Bytes queued toward clients and event subscribers, over every session.", nil, nil)
	laggingDesc     = prometheus.NewDesc("acphub_clients_reading_log", "Clients and subscribers catching up from the log rather than live.", nil, nil)
	usedDesc        = prometheus.NewDesc("acphub_session_context_used_tokens", "The context a session's agent says it uses (its last usage_update).", []string{"session", "agent"}, nil)
	sizeDesc        = prometheus.NewDesc("acphub_session_context_size_tokens", "The context size a session's agent says it has (its last usage_update).", []string{"session", "agent"}, nil)
	costDesc        = prometheus.NewDesc("acphub_session_cost", "What a session's agent says the session cost so far (its last usage_update), in currency.", []string{"session", "agent", "currency"}, nil)
	costTotalDesc   = prometheus.NewDesc("acphub_cost", "The sum of acphub_session_cost over the sessions the hub knows, by currency.", []string{"currency"}, nil)
	expLagDesc      = prometheus.NewDesc("acphub_exporter_lag_events", "Durable events an exporter has not had acknowledged yet.", []string{"exporter"}, nil)
	expLagSecDesc   = prometheus.NewDesc("acphub_exporter_lag_seconds", "Age of the oldest event an exporter gathered and has not had acknowledged.", []string{"exporter"}, nil)
	expExportedDesc = prometheus.NewDesc("acphub_exporter_exported_events_total", "Events an exporter's receiver acknowledged since the hub started.", []string{"exporter"}, nil)
	expFailDesc     = prometheus.NewDesc("acphub_exporter_failures_total", "Failed delivery attempts of an exporter since the hub started.", []string{"exporter"}, nil)
	leasesDesc      = prometheus.NewDesc("acphub_cluster_leases", "Sessions whose lease this cluster node holds: the sessions it runs.", nil, nil)
	leasesLostDesc  = prometheus.NewDesc("acphub_cluster_leases_lost_total", "Leases this cluster node lost since it started: a renewal refused, or none within the lease's TTL.", nil, nil)
	forwardedDesc   = prometheus.NewDesc("acphub_cluster_forwarded_clients", "Forwarded clients: links this cluster node holds for clients it reached (side reached), and serves for the sessions it runs (side served).", []string{"side"}, nil)
)

func (scraped) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{sessionsDesc, waitingDesc, queuedDesc, laggingDesc, usedDesc, sizeDesc, costDesc, costTotalDesc, expLagDesc, expLagSecDesc, expExportedDesc, expFailDesc, leasesDesc, leasesLostDesc, forwardedDesc} {
		ch <- d
	}
}

func (s scraped) Collect(ch chan<- prometheus.Metric) {
	m := s.m
	if m.node != nil {
		n := m.node()
		ch <- prometheus.MustNewConstMetric(leasesDesc, prometheus.GaugeValue, float64(n.Leases))
		ch <- prometheus.MustNewConstMetric(leasesLostDesc, prometheus.CounterValue, float64(n.LeasesLost))
		ch <- prometheus.MustNewConstMetric(forwardedDesc, prometheus.GaugeValue, float64(n.Reached), "reached")
		ch <- prometheus.MustNewConstMetric(forwardedDesc, prometheus.GaugeValue, float64(n.Served), "served")
	}
	states := map[string]float64{api.StateIdle: 0, api.StateRunning: 0, api.StateRequiresAction: 0, api.StateAgentExited: 0, api.StateStopped: 0}
	var waiting float64
	costs := map[string]float64{}
	if m.src.Sessions != nil {
		for _, sum := range m.src.Sessions() {
			if sum.State == api.StateDeleted {
				continue
			}
			states[sum.State]++
			waiting += float64(sum.Waiting)
			var u struct {
				Used, Size *float64
				Cost       *struct {
					Amount   float64
					Currency string
				}
			}
			if len(sum.Usage) == 0 || json.Unmarshal(sum.Usage, &u) != nil {
				continue
			}
			if u.Used != nil {
				ch <- prometheus.MustNewConstMetric(usedDesc, prometheus.GaugeValue, *u.Used, sum.Key, sum.Agent)
			}
			if u.Size != nil {
				ch <- prometheus.MustNewConstMetric(sizeDesc, prometheus.GaugeValue, *u.Size, sum.Key, sum.Agent)
			}
			if u.Cost != nil {
				ch <- prometheus.MustNewConstMetric(costDesc, prometheus.GaugeValue, u.Cost.Amount, sum.Key, sum.Agent, u.Cost.Currency)
				costs[u.Cost.Currency] += u.Cost.Amount
			}
		}
	}
	for state, n := range states {
		ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, n, state)
	}
	for currency, v := range costs {
		ch <- prometheus.MustNewConstMetric(costTotalDesc, prometheus.GaugeValue, v, currency)
	}
	ch <- prometheus.MustNewConstMetric(waitingDesc, prometheus.GaugeValue, waiting)
	var queued, lagging float64
	m.mu.Lock()
	for _, q := range m.queues {
		queued += float64(q.bytes)
		lagging += float64(q.lagging)
	}
	m.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(queuedDesc, prometheus.GaugeValue, queued)
	ch <- prometheus.MustNewConstMetric(laggingDesc, prometheus.GaugeValue, lagging)
	if m.src.Exporters != nil {
		for _, e := range m.src.Exporters() {
			ch <- prometheus.MustNewConstMetric(expLagDesc, prometheus.GaugeValue, float64(e.LagEvents), e.Name)
			ch <- prometheus.MustNewConstMetric(expLagSecDesc, prometheus.GaugeValue, e.LagSeconds, e.Name)
			ch <- prometheus.MustNewConstMetric(expExportedDesc, prometheus.CounterValue, float64(e.Exported), e.Name)
			ch <- prometheus.MustNewConstMetric(expFailDesc, prometheus.CounterValue, float64(e.Failures), e.Name)
		}
	}
}
