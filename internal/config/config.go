// Package config reads acphub's settings: defaults, then the TOML file,
// then command-line flags, each overriding the one before.
//
// The file's agents table has the shape of Zed's agent_servers:
//
//	[agents.claude]
//	command = "npx"
//	args = ["-y", "@agentclientprotocol/claude-agent-acp"]
//	env = { ANTHROPIC_LOG = "debug" }
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/acphub/acphub/api"
)

// Defaults.
const (
	DefaultListen = "127.0.0.1:7878"
	DefaultAgent  = "demo"
)

// Agent is one configured agent.
type Agent struct {
	Command string            `toml:"command"`
	Args    []string          `toml:"args"`
	Env     map[string]string `toml:"env"`
	// PassEnv adds, for this agent, to the variables it inherits from the
	// hub's environment (see Config.PassEnv).
	PassEnv []string `toml:"pass_env"`
	// FSPolicy and TerminalPolicy, when set, replace the daemon's
	// fs_policy and terminal_policy for sessions running this agent.
	FSPolicy       string `toml:"fs_policy"`
	TerminalPolicy string `toml:"terminal_policy"`
}

// EnvList returns Env as sorted KEY=value entries.
func (a Agent) EnvList() []string {
	keys := make([]string, 0, len(a.Env))
	for k := range a.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k+"="+a.Env[k])
	}
	return out
}

// Config holds every setting of the daemon and its clients.
type Config struct {
	Listen       string   `toml:"listen"`
	DataDir      string   `toml:"data_dir"`
	LogFormat    string   `toml:"log_format"`
	LogLevel     string   `toml:"log_level"`
	Agent        string   `toml:"agent"`
	AgentCmd     string   `toml:"agent_cmd"`
	IdleTTL      Duration `toml:"idle_ttl"`
	PromptQueue  int      `toml:"prompt_queue"`
	ClientQueue  int      `toml:"client_queue"`
	ClientStall  Duration `toml:"client_stall_timeout"`
	ResumeWindow Duration `toml:"resume_window"`
	MaxFrame     int      `toml:"max_frame"`
	MaxSessions  int      `toml:"max_sessions"`
	// MaxUnauthenticated and UnauthenticatedTimeout bound the TCP
	// connections that have not presented a token that works.
	MaxUnauthenticated     int      `toml:"max_unauthenticated"`
	UnauthenticatedTimeout Duration `toml:"unauthenticated_timeout"`
	PermissionTimeout      Duration `toml:"permission_timeout"`
	// Claims makes agents' permission requests and elicitations claimed
	// (one client claims, then answers) rather than first-answer-wins.
	Claims         bool     `toml:"claims"`
	AllowedOrigins []string `toml:"allowed_origins"`
	AllowedHosts   []string `toml:"allowed_hosts"`
	PublicURL      string   `toml:"public_url"`
	TLSCert        string   `toml:"tls_cert"`
	TLSKey         string   `toml:"tls_key"`
	AllowInsecure  bool     `toml:"allow_insecure_remote"`
	FSPolicy       string   `toml:"fs_policy"`
	TerminalPolicy string   `toml:"terminal_policy"`
	Executor       string   `toml:"executor"`
	// SelfHandleDeny replaces self_handle's default denylist when set (an
	// empty list denies nothing); DenyExtra, from --self-handle-deny, is
	// added to whichever list is in effect.
	SelfHandleDeny    []string `toml:"self_handle_deny"`
	DenyExtra         []string `toml:"-"`
	MaxTerminals      int      `toml:"max_terminals"`
	MaxFileBytes      int64    `toml:"max_file_bytes"`
	MaxTerminalOutput int      `toml:"max_terminal_output"`
	// Remote sessions: the schemes and hosts a remote may use (nil: the
	// default schemes, any host), the result branch prefix, the commits'
	// author, and whether results are pushed.
	RemoteSchemes      []string `toml:"remote_schemes"`
	RemoteHosts        []string `toml:"remote_hosts"`
	BranchPrefix       string   `toml:"branch_prefix"`
	GitAuthorName      string   `toml:"git_author_name"`
	GitAuthorEmail     string   `toml:"git_author_email"`
	NoPush             bool     `toml:"no_push"`
	WorkspaceRetention Duration `toml:"workspace_retention"`
	ExitWhenIdle       Duration `toml:"exit_when_idle"`
	DebugListen        string   `toml:"debug_listen"`
	MetricsListen      string   `toml:"metrics_listen"`
	// Store is where session logs are kept: "" for SQLite in the data
	// dir, or a NATS server's URL (nats://, tls://) for JetStream, with
	// the credentials file, CA file and stream replicas below.
	Store        string `toml:"store"`
	NATSCreds    string `toml:"nats_creds"`
	NATSCA       string `toml:"nats_ca"`
	NATSReplicas int    `toml:"nats_replicas"`
	// Node names this hub among the nodes of a cluster (--store nats);
	// LeaseTTL is how long a session's lease outlives its node's last
	// renewal (docs/cluster.md).
	Node     string           `toml:"node"`
	LeaseTTL Duration         `toml:"lease_ttl"`
	Agents   map[string]Agent `toml:"agents"`
	// PassEnv names variables of the hub's environment, or prefixes
	// written NAME_*, that every agent inherits besides agent.DefaultPass.
	PassEnv []string `toml:"pass_env"`
	// File is the config file that was read; "" when none was.
	File string `toml:"-"`
	// Exporters ship a copy of every session's log elsewhere; Redact adds
	// rules to what they remove (docs/export.md).
	Exporters map[string]Exporter `toml:"exporters"`
	Redact    Redact              `toml:"redact"`
	// Notify are where notifications go (docs/notifications.md).
	Notify map[string]Notify `toml:"notify"`
}

// Duration is a time.Duration written as "90s", "10m" in the file.
type Duration struct{ time.Duration }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	d.Duration = v
	return err
}

// Default returns the settings used when neither file nor flags say.
func Default() Config {
	return Config{
		Listen:    DefaultListen,
		DataDir:   DefaultDataDir(),
		LogFormat: "text",
		LogLevel:  "info",
		Agent:     DefaultAgent,
	}
}

// DefaultDataDir is $XDG_STATE_HOME/acphub, or ~/.local/state/acphub.
func DefaultDataDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "acphub")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "acphub")
	}
	return filepath.Join(home, ".local", "state", "acphub")
}

// CheckDataDir refuses a data dir that cannot be one: a path that is there
// and is no directory, or that lies under a file. One that is not there yet
// is fine: the hub creates it.
func CheckDataDir(dir string) error {
	fi, err := os.Stat(dir)
	if (err == nil && !fi.IsDir()) || errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("--data-dir %s: not a directory", dir)
	}
	return nil
}

// DefaultPath is $XDG_CONFIG_HOME/acphub/agents.toml, or
// ~/.config/acphub/agents.toml.
func DefaultPath() string {
	if d := os.Getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "acphub", "agents.toml")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".config", "acphub", "agents.toml")
}

// Load reads the file at path over cfg. A missing file is not an error when
// optional is true (the default path); a file given explicitly must exist.
func Load(cfg *Config, path string, optional bool) error {
	if path == "" {
		return nil
	}
	md, err := toml.DecodeFile(path, cfg)
	if err != nil {
		if optional && errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("config %s: %w", path, err)
	}
	if undec := md.Undecoded(); len(undec) > 0 {
		return fmt.Errorf("config %s: unknown setting %q", path, undec[0].String())
	}
	cfg.File = path
	for name, a := range cfg.Agents {
		if a.Command == "" {
			return fmt.Errorf("config %s: agents.%s has no command", path, name)
		}
	}
	if err := checkExporters(cfg.Exporters, api.EventTypes()); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	if err := checkNotify(cfg.Notify); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	return nil
}
