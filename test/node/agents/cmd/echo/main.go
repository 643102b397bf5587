// Command echo is the HTTP workload used by marina's end-to-end tests.
//
//	GET /         200, JSON {"hostname", "pod", "namespace", "host", "path", "remote", "message"}
//	GET /healthz  200, "ok"
//
// Environment: PORT (default 8080), POD_NAME, POD_NAMESPACE, MESSAGE.
// With TLS_CERT_FILE and TLS_KEY_FILE (a certificate and its key, PEM) it
// also serves the same over HTTPS on TLS_PORT (default 8443).
// SIGTERM or SIGINT shut the server down gracefully.
//
// `echo get URL [TIMEOUT]` is the client side, for a pod that must reach a
// Service (the tests' cross-cluster check): it GETs URL until a 200 or
// TIMEOUT (a Go duration, default 60s), prints the body and exits 0; else it
// prints the last error and exits 1.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// reply is the body of GET /.
type reply struct {
	Hostname  string `json:"hostname"`
	Pod       string `json:"pod"`
	Namespace string `json:"namespace"`
	// Host is the request's Host header: by name, the name the client used.
	Host    string `json:"host"`
	Path    string `json:"path"`
	Remote  string `json:"remote"`
	Message string `json:"message"`
}

// identity is what the server reports about itself.
type identity struct {
	Hostname  string
	Pod       string
	Namespace string
	Message   string
}

func newHandler(id identity) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
	})
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
		body, err := json.Marshal(reply{
			Hostname:  id.Hostname,
			Pod:       id.Pod,
			Namespace: id.Namespace,
			Host:      r.Host,
			Path:      r.URL.Path,
			Remote:    r.RemoteAddr,
			Message:   id.Message,
		})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(append(body, '\n'))
	})
	return mux
}

func main() {
	log.SetPrefix("echo: ")
	if len(os.Args) > 1 && os.Args[1] == "get" {
		os.Exit(get(os.Args[2:], os.Stdout))
	}
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	hostname, err := os.Hostname()
	if err != nil {
		log.Printf("hostname: %v", err)
	}
	srv := &http.Server{
		Addr: net.JoinHostPort("", port),
		Handler: newHandler(identity{
			Hostname:  hostname,
			Pod:       os.Getenv("POD_NAME"),
			Namespace: os.Getenv("POD_NAMESPACE"),
			Message:   os.Getenv("MESSAGE"),
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	errc := make(chan error, 1)
	go func() {
		log.Printf("listening on %s", srv.Addr)
		errc <- srv.ListenAndServe()
	}()
	certFile, keyFile := os.Getenv("TLS_CERT_FILE"), os.Getenv("TLS_KEY_FILE")
	if (certFile == "") != (keyFile == "") {
		log.Fatal("set both TLS_CERT_FILE and TLS_KEY_FILE, or neither")
	}
	if certFile != "" {
		tlsPort := os.Getenv("TLS_PORT")
		if tlsPort == "" {
			tlsPort = "8443"
		}
		tlsSrv := &http.Server{Addr: net.JoinHostPort("", tlsPort), Handler: srv.Handler, ReadHeaderTimeout: srv.ReadHeaderTimeout}
		go func() {
			log.Printf("listening on %s (HTTPS, %s)", tlsSrv.Addr, certFile)
			if err := tlsSrv.ListenAndServeTLS(certFile, keyFile); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("HTTPS: %w", err)
			}
		}()
		defer tlsSrv.Close()
	}

	select {
	case err := <-errc:
		log.Fatal(err)
	case <-ctx.Done():
	}
	log.Printf("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Printf("shutdown: %v", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Printf("serve: %v", err)
	}
}

// get is `echo get URL [TIMEOUT]`; it returns the exit status.
func get(args []string, out io.Writer) int {
	if len(args) < 1 || len(args) > 2 {
		log.Print("usage: echo get URL [TIMEOUT]")
		return 2
	}
	timeout := 60 * time.Second
	if len(args) == 2 {
		d, err := time.ParseDuration(args[1])
		if err != nil || d <= 0 {
			log.Printf("TIMEOUT %q: want a positive duration such as 30s", args[1])
			return 2
		}
		timeout = d
	}
	client := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(timeout)
	var last error
	for attempt := 1; ; attempt++ {
		body, err := getOnce(client, args[0])
		if err == nil {
			_, _ = out.Write(body)
			log.Printf("GET %s: 200 after %d attempt(s)", args[0], attempt)
			return 0
		}
		last = err
		if time.Now().Add(500 * time.Millisecond).After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	log.Printf("GET %s: no 200 within %s: %v", args[0], timeout, last)
	return 1
}

func getOnce(client *http.Client, url string) ([]byte, error) {
	resp, err := client.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", resp.Status, body)
	}
	return body, nil
}
