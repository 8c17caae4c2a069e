package config

// Sample is a commented, valid configuration: the analyst agent of a small
// pipeline, handing off to a summarizer and receiving from a planner. It keeps
// state in memory so that it runs with nothing else installed. Every optional
// key appears, commented out at its default. docs/config.md shows it verbatim
// (a test keeps the two equal), and `baton validate` accepts it.
const Sample = `# Baton configuration: one file per Baton, one Baton beside each agent.
# Check it with: baton validate --config baton.yaml
# Every key is described in docs/config.md. Unknown keys are errors.

# This agent's name. It travels as Baton-Agent, signed, so peers know who
# handed off to them. Lowercase letters, digits, '.', '_', '-'. Env: BATON_AGENT.
agent: analyst

# The local agent's base URL: where ingress delivers handoffs. Env: BATON_UPSTREAM.
upstream: http://127.0.0.1:9001

# log_level: info          # debug, info, warn or error. Env: BATON_LOG_LEVEL.
# shutdown_grace: 15s      # time for in-flight requests after SIGTERM. Env: BATON_SHUTDOWN_GRACE.

listen:
  egress: 127.0.0.1:15001  # the agent's outbound calls enter here (keep it on loopback)
  ingress: 0.0.0.0:15006   # other Batons deliver handoffs here
  admin: 127.0.0.1:15000   # health, readiness, metrics, records, dead letters

store:
  # Without redis, state lives in this process's memory, bounded here.
  memory:
    max_entries: 100000
    max_bytes: 67108864    # 64 MiB
  # A Baton's liveness mark outlives its last renewal by this: the claims
  # of a Baton that died for good are free after it (one that restarts
  # frees its predecessor's when it starts).
  holder_timeout: 3s
  # With redis, several replicas of one agent share a dedupe window.
  # redis:
  #   url: redis://127.0.0.1:6379/0   # or addrs: [...] (+ master_name for Sentinel)
  #   prefix: "baton:"
  #   # password: prefer BATON_REDIS_PASSWORD to writing it here
  #   dial_timeout: 2s
  #   op_timeout: 1s

# Other agents' Batons, by agent name: the URL of each one's ingress.
peers:
  summarizer: {url: http://127.0.0.1:16006}

# Non-agent hosts the agent may call; what they return is untrusted content.
# Anything that is neither a peer nor listed here is refused.
external:
  allow:
    - api.example.com:443
    - "*.wikipedia.org:443"   # quoted: a YAML value cannot start with *
  # Model APIs served on the egress under /<name>/ for SDKs whose base URL
  # points there (OPENAI_BASE_URL=http://127.0.0.1:15001/openai/v1): their
  # calls are journaled and labelled with no CA to trust.
  # routes:
  #   - name: openai                # https://api.openai.com/
  #   - name: azure-openai
  #     url: https://NAME.openai.azure.com/

# Handoff edges. to: this agent may hand off to that peer; from: that agent
# may hand off to this one. max_hops bounds the depth of a chain (1 to 255).
edges:
  - to: summarizer
    max_hops: 8
  - from: planner          # max_hops defaults to 8

# limits:
#   max_body_bytes: 10485760  # 10 MiB

# timeouts:
#   read_header: 10s
#   read: 0s               # 0: none, so that long requests and streams work
#   idle: 120s
#   dial: 5s
#   upstream_header: 60s

# intercept:
#   mode: proxy            # or transparent: after ` + "`baton iptables`" + ` (docs/interception.md)
#   inbound_ports: []      # agent ports besides upstream's that redirected inbound may reach
`
