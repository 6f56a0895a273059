package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"lvs-feedback/replica"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// Config says how to reach etcd and who this director is.
type Config struct {
	ID        string
	Endpoints []string
	// Prefix is put before every key (e.g. "/lvs-feedback/").
	Prefix string
	// LeaseTTL is the lease of this director's counters and election key:
	// a director silent this long is out of the fleet (whole seconds, ≥ 2).
	LeaseTTL    time.Duration
	DialTimeout time.Duration
	// OpTimeout bounds every read and write (default DialTimeout).
	OpTimeout                 time.Duration
	CAFile, CertFile, KeyFile string
	Username, PasswordFile    string
	// Observer: keep a lease and publish, but never campaign (a director
	// run with -dry-run must not lead the fleet).
	Observer bool
	// Members are the directors whose counters the leader reads (ID among
	// them): a record under another id is refused, whoever wrote it.
	Members []string
	Logger  *slog.Logger
}

// Keys is the key layout under a prefix.
type Keys struct{ Prefix string }

// Directors is the prefix of the directors' counters, one key each.
func (k Keys) Directors() string { return k.Prefix + "directors/" }

// Director is one director's counters key.
func (k Keys) Director(id string) string { return k.Directors() + id }

// Election is the election prefix (concurrency.Election keys under it).
func (k Keys) Election() string { return k.Prefix + "election/" }

// Candidates is where the election's candidates' keys are:
// concurrency.NewElection adds "/" to its prefix, so a key elsewhere under
// Election takes no part in the election and must not be read as its
// leader.
func (k Keys) Candidates() string { return k.Election() + "/" }

// State is the leader's desired-state document.
func (k Keys) State() string { return k.Prefix + "state" }

// ErrNotLeader means a leader-only read or write found that this director
// no longer holds the election key (its lease expired, or it never won).
var ErrNotLeader = errors.New("not the fleet leader (election key lost)")

// ErrNoLease means this director has no live lease yet (etcd unreachable
// since the start, or a lost lease being renewed).
var ErrNoLease = errors.New("no etcd lease")

// ErrUntrusted marks a director's counters that decode but are not
// believed: an id the configuration does not list, or a record not bound
// to a live lease (etcd deletes a leased key when its lease expires; one
// written without a lease would count for ever).
var ErrUntrusted = errors.New("untrusted director counters")

// ErrDocumentMoved means the document changed since the leader read it:
// another writer, so this one does not overwrite it.
var ErrDocumentMoved = errors.New("the state document changed since it was read")

// Status is the etcd side as this director last saw it.
type Status struct {
	// Leader: this director won the election and its lease is live.
	Leader bool
	// Term is this director's election key creation revision while it
	// leads (0 otherwise).
	Term int64
	// LeaseOK: this director holds a live lease.
	LeaseOK bool
	// Up: the last etcd operation succeeded.
	Up      bool
	LastErr string
	// Errors counts failed etcd operations since start.
	Errors uint64
}

// Client is one director's connection to the fleet's etcd. Its methods
// are safe for concurrent use.
type Client struct {
	cfg  Config
	keys Keys
	cli  *clientv3.Client
	log  *slog.Logger
	ttl  int

	mu      sync.Mutex
	session *concurrency.Session
	elect   *concurrency.Election
	leader  bool
	st      Status

	cancel context.CancelFunc
	done   chan struct{}
}

// New connects (without waiting for etcd: a director starts, and holds
// its table, while etcd is unreachable) and starts campaigning.
func New(cfg Config) (*Client, error) {
	if !replica.ValidSender(cfg.ID) {
		return nil, fmt.Errorf("fleet: invalid director id %q", cfg.ID)
	}
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("fleet: no etcd endpoints")
	}
	if !slices.Contains(cfg.Members, cfg.ID) {
		return nil, fmt.Errorf("fleet: director %q is not among the members %q", cfg.ID, cfg.Members)
	}
	for _, id := range cfg.Members {
		if !replica.ValidSender(id) {
			return nil, fmt.Errorf("fleet: invalid member id %q", id)
		}
	}
	if cfg.LeaseTTL < 2*time.Second {
		return nil, fmt.Errorf("fleet: lease TTL %v below 2 s", cfg.LeaseTTL)
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	if cfg.OpTimeout <= 0 {
		cfg.OpTimeout = cfg.DialTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ec := clientv3.Config{Endpoints: cfg.Endpoints, DialTimeout: cfg.DialTimeout, Logger: zap.NewNop(),
		DialKeepAliveTime: cfg.DialTimeout, DialKeepAliveTimeout: cfg.DialTimeout}
	if cfg.CertFile != "" || cfg.CAFile != "" {
		tlsInfo := transport.TLSInfo{CertFile: cfg.CertFile, KeyFile: cfg.KeyFile, TrustedCAFile: cfg.CAFile}
		tc, err := tlsInfo.ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("fleet: TLS client configuration: %w", err)
		}
		ec.TLS = tc
	}
	if cfg.Username != "" {
		pw, err := os.ReadFile(cfg.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("fleet: etcd password: %w", err)
		}
		ec.Username, ec.Password = cfg.Username, strings.TrimRight(string(pw), "\r\n")
	}
	cli, err := clientv3.New(ec)
	if err != nil {
		return nil, fmt.Errorf("fleet: etcd client: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Client{cfg: cfg, keys: Keys{Prefix: cfg.Prefix}, cli: cli, log: cfg.Logger,
		ttl: int(math.Ceil(cfg.LeaseTTL.Seconds())), cancel: cancel, done: make(chan struct{})}
	go c.campaign(ctx)
	return c, nil
}

// Keys returns the key layout.
func (c *Client) Keys() Keys { return c.keys }

// Close resigns (revoking the lease: the fleet elects another leader at
// once instead of after the TTL) and disconnects.
func (c *Client) Close() error {
	c.cancel()
	select {
	case <-c.done:
	case <-time.After(2 * c.cfg.OpTimeout):
		// etcd unreachable: the election's own resignation waits on the
		// client, which closing releases.
		err := c.cli.Close()
		<-c.done
		return err
	}
	return c.cli.Close()
}

// Status returns the etcd side's status.
func (c *Client) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.st
	s.Leader, s.LeaseOK = c.leader, c.session != nil
	if c.leader {
		s.Term = c.elect.Rev()
	}
	return s
}

// WaitLease waits until this director holds a lease or ctx ends, and
// reports whether it holds one. The lease is granted in the background
// (New does not wait for etcd); a director that starts by waiting for it
// applies the fleet's document in its first cycle instead of holding its
// table for that cycle.
func (c *Client) WaitLease(ctx context.Context) bool {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		if c.Status().LeaseOK {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

// note records the outcome of an etcd operation.
func (c *Client) note(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil || errors.Is(err, ErrNotLeader) || errors.Is(err, ErrDocumentMoved) {
		c.st.Up, c.st.LastErr = true, ""
		return
	}
	c.st.Errors++
	if !errors.Is(err, ErrMalformed) {
		c.st.Up = false
	}
	c.st.LastErr = err.Error()
}

// campaign keeps a lease and an election candidacy until ctx ends.
func (c *Client) campaign(ctx context.Context) {
	defer close(c.done)
	backoff := time.Second
	for ctx.Err() == nil {
		s, err := concurrency.NewSession(c.cli, concurrency.WithTTL(c.ttl), concurrency.WithContext(ctx))
		if err != nil {
			c.note(fmt.Errorf("lease: %w", err))
			c.log.Warn("fleet: cannot get an etcd lease; retrying", "error", err, "in", backoff)
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Duration(c.ttl)*time.Second)
			continue
		}
		backoff = time.Second
		c.note(nil)
		e := concurrency.NewElection(s, c.keys.Election())
		c.mu.Lock()
		c.session, c.elect = s, e
		c.mu.Unlock()
		c.log.Info("fleet: lease granted; campaigning", "lease", fmt.Sprintf("%x", s.Lease()))
		cctx, stop := context.WithCancel(ctx)
		go func() {
			select {
			case <-s.Done():
			case <-cctx.Done():
			}
			stop()
		}()
		if c.cfg.Observer {
			<-cctx.Done()
		} else if err := e.Campaign(cctx, c.cfg.ID); err == nil {
			c.mu.Lock()
			c.leader = true
			c.mu.Unlock()
			c.log.Info("fleet: elected leader", "term", e.Rev())
		} else if ctx.Err() == nil && cctx.Err() == nil {
			c.note(fmt.Errorf("campaign: %w", err))
		}
		<-cctx.Done()
		stop()
		c.mu.Lock()
		wasLeader := c.leader
		c.session, c.elect, c.leader = nil, nil, false
		c.mu.Unlock()
		if ctx.Err() != nil {
			rctx, cancel := context.WithTimeout(context.Background(), c.cfg.OpTimeout)
			_, _ = c.cli.Revoke(rctx, s.Lease()) // hand over now rather than after the TTL
			cancel()
			return
		}
		c.note(errors.New("lease expired"))
		c.log.Warn("fleet: etcd lease lost; holding the table until a new one is granted", "was_leader", wasLeader)
	}
}

// lease returns the live session's lease and, while leading, the
// election key and its revision.
func (c *Client) lease() (clientv3.LeaseID, string, int64, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session == nil {
		return 0, "", 0, false, ErrNoLease
	}
	if !c.leader {
		return c.session.Lease(), "", 0, false, nil
	}
	return c.session.Lease(), c.elect.Key(), c.elect.Rev(), true, nil
}

// Publish stores this director's counters under its lease: one write.
func (c *Client) Publish(ctx context.Context, ctr Counters) error {
	err := c.publish(ctx, ctr)
	c.note(err)
	return err
}

func (c *Client) publish(ctx context.Context, ctr Counters) error {
	lease, _, _, _, err := c.lease()
	if err != nil {
		return err
	}
	b, err := EncodeCounters(ctr)
	if err != nil {
		return fmt.Errorf("encode counters: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
	defer cancel()
	if err := retry(ctx, func() error {
		_, err := c.cli.Put(ctx, c.keys.Director(c.cfg.ID), string(b), clientv3.WithLease(lease))
		return err
	}); err != nil {
		return fmt.Errorf("publish counters: %w", err)
	}
	return nil
}

// Fleet is what the leader reads at the start of its cycle.
type Fleet struct {
	// Directors are the counters of the other listed directors with a
	// live lease, malformed (Malformed) and untrusted ones (Refused) left
	// out.
	Directors []Counters
	Malformed []error
	Refused   []error
	// Document is the stored desired state; nil if none yet.
	Document *Document
	// DocumentRevision is the document's modification revision (0: none).
	DocumentRevision int64
}

// ReadFleet is the leader's read: the other directors' counters and the
// document's revision (and, withDocument, the document: a leader needs it
// only when its term starts), in one transaction that succeeds only while
// this director holds the election key. A malformed document is an error
// wrapping ErrMalformed, with the rest of the Fleet.
func (c *Client) ReadFleet(ctx context.Context, withDocument bool) (Fleet, error) {
	f, err := c.readFleet(ctx, withDocument)
	if err != nil && errors.Is(err, ErrNotLeader) {
		c.lostLeadership()
	}
	c.note(err)
	return f, err
}

func (c *Client) readFleet(ctx context.Context, withDocument bool) (Fleet, error) {
	_, key, rev, leading, err := c.lease()
	if err != nil {
		return Fleet{}, err
	}
	if !leading {
		return Fleet{}, ErrNotLeader
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
	defer cancel()
	var docOpts []clientv3.OpOption
	if !withDocument {
		docOpts = append(docOpts, clientv3.WithKeysOnly()) // its revision only
	}
	var resp *clientv3.TxnResponse
	if err := retry(ctx, func() (err error) {
		resp, err = c.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).
			Then(clientv3.OpGet(c.keys.Directors(), clientv3.WithPrefix()), clientv3.OpGet(c.keys.State(), docOpts...)).Commit()
		return err
	}); err != nil {
		return Fleet{}, fmt.Errorf("read the fleet: %w", err)
	}
	if !resp.Succeeded {
		return Fleet{}, ErrNotLeader
	}
	var f Fleet
	own := c.keys.Director(c.cfg.ID)
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		if string(kv.Key) == own {
			continue // the leader has its own figures
		}
		ctr, err := DecodeCounters(kv.Value)
		if err == nil && c.keys.Director(ctr.Director) != string(kv.Key) {
			err = fmt.Errorf("counters of %q stored under %q", ctr.Director, kv.Key)
		}
		if err != nil {
			f.Malformed = append(f.Malformed, fmt.Errorf("%w: %s: %w", ErrMalformed, kv.Key, err))
			continue
		}
		switch {
		case !slices.Contains(c.cfg.Members, ctr.Director):
			f.Refused = append(f.Refused, fmt.Errorf("%w: %s: director %q is not in sync.etcd.directors", ErrUntrusted, kv.Key, ctr.Director))
			continue
		case kv.Lease == 0:
			f.Refused = append(f.Refused, fmt.Errorf("%w: %s: written without a lease (a director publishes under its own)", ErrUntrusted, kv.Key))
			continue
		}
		f.Directors = append(f.Directors, ctr)
	}
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) == 1 {
		f.DocumentRevision = kvs[0].ModRevision
		if !withDocument {
			return f, nil
		}
		d, err := DecodeDocument(kvs[0].Value)
		if err != nil {
			return f, fmt.Errorf("%w: %s: %w", ErrMalformed, kvs[0].Key, err)
		}
		d.Revision = kvs[0].ModRevision
		f.Document = &d
	}
	if len(f.Malformed) > 0 {
		c.note(errors.Join(f.Malformed...))
	}
	return f, nil
}

// lostLeadership clears the leader flag after a fenced operation failed:
// the election key is gone, so the session is of no use either; the
// campaign loop renews both.
func (c *Client) lostLeadership() {
	c.mu.Lock()
	s := c.session
	c.leader = false
	c.mu.Unlock()
	if s != nil {
		s.Orphan() // stops its keepalive: Done closes and the campaign starts anew
	}
}

// WriteDocument is the leader's write: the document and this director's
// counters in one transaction that succeeds only while this director
// holds the election key and the document is still at docRev (0: absent).
func (c *Client) WriteDocument(ctx context.Context, d Document, docRev int64, own Counters) (int64, error) {
	rev, err := c.writeDocument(ctx, d, docRev, own)
	if errors.Is(err, ErrNotLeader) {
		c.lostLeadership()
	}
	c.note(err)
	return rev, err
}

func (c *Client) writeDocument(ctx context.Context, d Document, docRev int64, own Counters) (int64, error) {
	lease, key, rev, leading, err := c.lease()
	if err != nil {
		return 0, err
	}
	if !leading {
		return 0, ErrNotLeader
	}
	d.Term = rev
	doc, err := EncodeDocument(d)
	if err != nil {
		return 0, fmt.Errorf("encode document: %w", err)
	}
	ctr, err := EncodeCounters(own)
	if err != nil {
		return 0, fmt.Errorf("encode counters: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
	defer cancel()
	// A retry after an error whose outcome is unknown may find its own
	// write done: ErrDocumentMoved then, and the next cycle reads anew.
	var resp *clientv3.TxnResponse
	if err := retry(ctx, func() (err error) {
		resp, err = c.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev), clientv3.Compare(clientv3.ModRevision(c.keys.State()), "=", docRev)).
			Then(clientv3.OpPut(c.keys.State(), string(doc)), clientv3.OpPut(c.keys.Director(c.cfg.ID), string(ctr), clientv3.WithLease(lease))).
			Else(clientv3.OpGet(key, clientv3.WithCountOnly())).Commit()
		return err
	}); err != nil {
		return 0, fmt.Errorf("write the document: %w", err)
	}
	if !resp.Succeeded {
		if resp.Responses[0].GetResponseRange().Count == 0 {
			return 0, ErrNotLeader
		}
		return 0, ErrDocumentMoved
	}
	return resp.Header.Revision, nil
}

// View is what a follower reads each cycle.
type View struct {
	// Document is the stored desired state; nil if none yet.
	Document *Document
	// Leader is the current leader's id ("" if none) and LeaderTerm its
	// election key's creation revision: the term a document from it
	// carries.
	Leader     string
	LeaderTerm int64
	// Directors is how many directors publish counters.
	Directors int
}

// ReadView is a follower's read: the document, the leader's id and the
// number of directors publishing, in one transaction. A malformed
// document is an error wrapping ErrMalformed, with the rest of the view.
func (c *Client) ReadView(ctx context.Context) (View, error) {
	v, err := c.readView(ctx)
	c.note(err)
	return v, err
}

func (c *Client) readView(ctx context.Context) (View, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
	defer cancel()
	var resp *clientv3.TxnResponse
	if err := retry(ctx, func() (err error) {
		resp, err = c.cli.Txn(ctx).Then(
			clientv3.OpGet(c.keys.State()),
			clientv3.OpGet(c.keys.Candidates(), clientv3.WithFirstCreate()...),
			clientv3.OpGet(c.keys.Directors(), clientv3.WithPrefix(), clientv3.WithCountOnly()),
		).Commit()
		return err
	}); err != nil {
		return View{}, fmt.Errorf("read the state document: %w", err)
	}
	var v View
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) == 1 {
		v.Leader, v.LeaderTerm = string(kvs[0].Value), kvs[0].CreateRevision
	}
	v.Directors = int(resp.Responses[2].GetResponseRange().Count)
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
		d, err := DecodeDocument(kvs[0].Value)
		if err != nil {
			return v, fmt.Errorf("%w: %s: %w", ErrMalformed, kvs[0].Key, err)
		}
		d.Revision = kvs[0].ModRevision
		v.Document = &d
	}
	return v, nil
}

// retry runs op until it succeeds or ctx ends, pausing between attempts:
// etcd answers "leader changed" or "unavailable" while its members elect
// a new raft leader (one member down), which must not cost a cycle. Every
// operation retried is a read or a fenced transaction, safe to repeat.
func retry(ctx context.Context, op func() error) error {
	for {
		err := op()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}
