package transport

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/gridsub/gridsub/backends"
	"github.com/gridsub/gridsub/backends/transport/sshdtest"
)

// TestOTPLogin: an sshd whose PAM asks a TOTP code. Without a person to
// ask, the Client waits in "needs login" and sends nothing (no dial); a
// Login with the code connects, fifty commands run without asking again;
// a dropped connection returns to "needs login" (not a redial storm); a
// wrong code is refused saying so; the right one restores it.
func TestOTPLogin(t *testing.T) {
	dir := sshdtest.WorldDir(t)
	key, pub := sshdtest.NewKeyFile(t, dir, "id", "")
	s := sshdtest.StartOTP(t, "root", []ssh.PublicKey{pub})
	var logs syncBuffer
	cfg := Config{Host: "127.0.0.1", Port: s.Port, User: "root", KeyFiles: []string{key},
		KnownHosts: []string{writeKnownHosts(t, s.KnownHostsLine())}, Lazy: true, KeepAlive: time.Second,
		Logger: testLogger(t, &logs)}
	ctx := ctxTimeout(t, 120*time.Second)
	c, err := Dial(ctx, cfg)
	if err != nil {
		t.Fatalf("a lazy Dial to a site that needs a login: %v", err)
	}
	defer c.Close()
	if !c.NeedsLogin() || !errors.Is(c.Err(), backends.ErrNeedsLogin) {
		t.Fatalf("NeedsLogin %v, Err %v", c.NeedsLogin(), c.Err())
	}
	_, err = c.Run(ctx, []string{"true"}, nil)
	if !errors.Is(err, backends.ErrNeedsLogin) || !errors.Is(err, ErrNotSent) || !errors.Is(err, backends.ErrUnavailable) {
		t.Fatalf("Run while needing a login: %v", err)
	}
	if !strings.Contains(err.Error(), "gridsub login") {
		t.Errorf("the error does not say what to do: %v", err)
	}
	conns := func() int { b, _ := os.ReadFile(s.Log); return strings.Count(string(b), "Postponed publickey") }
	if n := conns(); n != 1 {
		t.Errorf("%d connections reached sshd, want 1 (the first dial; nothing while waiting for a login)", n)
	}

	p := &countingPrompter{answer: func(ch Challenge) ([]string, error) {
		return []string{s.Code(t, 0)}, nil
	}}
	if already, err := c.Login(ctx, p); err != nil || already {
		t.Fatalf("Login: %v %v", already, err)
	}
	if c.NeedsLogin() {
		t.Error("still needs login after Login")
	}
	var wg sync.WaitGroup
	for i := range 50 { // eight at a time (Config.MaxSessions), all on the one connection
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := c.Run(ctx, []string{"echo", fmt.Sprint(i)}, nil)
			if err != nil || string(res.Stdout) != fmt.Sprintf("%d\n", i) {
				t.Errorf("command %d: %q %v", i, res.Stdout, err)
			}
		}()
	}
	wg.Wait()
	time.Sleep(2500 * time.Millisecond) // keepalives go out and are answered
	if _, err := c.Run(ctx, []string{"true"}, nil); err != nil {
		t.Fatalf("after keepalives: %v", err)
	}
	if n := p.count(ChallengeKeyboard); n != 1 {
		t.Errorf("asked %d times, want once", n)
	}
	if already, err := c.Login(ctx, p); err != nil || !already {
		t.Errorf("Login while connected: already=%v %v", already, err)
	}

	if n := s.DropConnections(); n == 0 {
		t.Fatal("no connection to drop")
	}
	deadline := time.Now().Add(30 * time.Second)
	for !c.NeedsLogin() {
		c.Run(ctxTimeout(t, 10*time.Second), []string{"true"}, nil)
		if time.Now().After(deadline) {
			t.Fatalf("not needing a login after the drop: %v", c.Err())
		}
		time.Sleep(100 * time.Millisecond)
	}
	before := conns()
	for range 5 {
		if _, err := c.Run(ctx, []string{"true"}, nil); !errors.Is(err, backends.ErrNeedsLogin) {
			t.Fatalf("Run after the drop: %v", err)
		}
	}
	if n := conns(); n != before {
		t.Errorf("%d dials while waiting for a login, want none", n-before)
	}

	wrong := &countingPrompter{answer: func(Challenge) ([]string, error) { return []string{"000000"}, nil }}
	_, err = c.Login(ctx, wrong)
	if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "one-time code") {
		t.Errorf("a wrong code: %v", err)
	}
	p.answer = func(Challenge) ([]string, error) { return []string{s.Code(t, 30*time.Second)}, nil }
	if _, err := c.Login(ctx, p); err != nil {
		t.Fatalf("Login again: %v", err)
	}
	if _, err := c.Run(ctx, []string{"true"}, nil); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), s.Code(t, 0)) || strings.Contains(logs.String(), s.Code(t, 30*time.Second)) {
		t.Error("a one-time code reached the log")
	}
}

// TestPassphraseAskedOnce: an encrypted key file's passphrase is asked
// once (after one wrong answer, asked again), then the key serves every
// connection of the run, the jump host's and the login node's.
func TestPassphraseAskedOnce(t *testing.T) {
	dir := sshdtest.WorldDir(t)
	key, pub := sshdtest.NewKeyFile(t, dir, "id_enc", "right horse battery")
	bastion := sshdtest.Start(t, sshdtest.Opts{AuthKeys: []ssh.PublicKey{pub}, Extra: []string{"AllowTcpForwarding yes"}})
	login := sshdtest.Start(t, sshdtest.Opts{AuthKeys: []ssh.PublicKey{pub}})
	kh := writeKnownHosts(t, bastion.KnownHostsLine()+"\n"+login.KnownHostsLine())
	var answers []string
	p := &countingPrompter{answer: func(ch Challenge) ([]string, error) {
		if ch.Kind != ChallengePassphrase || !strings.Contains(ch.Questions[0].Text, key) || ch.Questions[0].Echo {
			t.Errorf("unexpected challenge %+v", ch)
		}
		a := "wrong"
		if len(answers) > 0 {
			a = "right horse battery"
		}
		answers = append(answers, a)
		return []string{a}, nil
	}}
	var logs syncBuffer
	cfg := Config{Host: "127.0.0.1", Port: login.Port, User: "root", KeyFiles: []string{key}, KnownHosts: []string{kh},
		Jumps: []Hop{{Host: "127.0.0.1", Port: bastion.Port}}, Prompter: p, Logger: testLogger(t, &logs)}
	ctx := ctxTimeout(t, 60*time.Second)
	// Without a Prompter: needs login, naming the key.
	noP := cfg
	noP.Prompter = nil
	if _, err := Dial(ctx, noP); !errors.Is(err, backends.ErrNeedsLogin) || !strings.Contains(err.Error(), key) {
		t.Errorf("an encrypted key and nobody to ask: %v", err)
	}
	c, err := Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 3 {
		if _, err := c.Run(ctx, []string{"true"}, nil); err != nil {
			t.Fatal(err)
		}
		login.DropConnections()
		bastion.DropConnections()
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := c.Run(ctx, []string{"true"}, nil); err != nil {
		t.Fatal(err)
	}
	if n := p.count(ChallengePassphrase); n != 2 {
		t.Errorf("asked %d times, want 2 (one wrong answer, then never again)", n)
	}
	if n := strings.Count(logs.String(), "server_version="); n < 4 {
		t.Errorf("%d login node connects, want 4 (reconnects after each drop)", n)
	}
	if strings.Contains(logs.String(), "right horse") {
		t.Error("the passphrase reached the log")
	}
}
