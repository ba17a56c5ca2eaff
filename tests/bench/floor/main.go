// Command floor is the cheapest backend an aggregated watch can have, for tests/bench/bench_apiserver.py.
//
// Why it exists: issue 11 asks v1 WATCH fan-out through kube-apiserver's aggregator to stay within 1.3x of
// watching the CRD directly. Part of the v1 path's cost is the aggregator's own hop (one more TLS read,
// decode, encode and write per watcher and event), which no backend can remove. This backend does the
// least any backend can: one upstream watch of the CRD, each event line sent on unchanged to every client
// watch from its own goroutine, no authentication and no conversion. Served through the same APIService
// routing as the worker, its ratio is the floor for the worker's. --http2 lets the aggregator multiplex
// every client watch over one HTTP/2 connection (aiohttp serves HTTP/1.1 only); without it, one HTTP/1.1
// connection per watch, as with the worker.
//
// Not product code and not a test double: a measuring instrument, built by the bench with the Go toolchain
// the sandbox builds the control plane with. Listens on 127.0.0.1 only.
package main

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"flag"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

type hub struct {
	mu      sync.Mutex
	clients map[chan []byte]struct{}
}

func (h *hub) add() chan []byte {
	c := make(chan []byte, 1024)
	h.mu.Lock()
	h.clients[c] = struct{}{}
	h.mu.Unlock()
	return c
}

func (h *hub) remove(c chan []byte) {
	h.mu.Lock()
	delete(h.clients, c)
	h.mu.Unlock()
}

func (h *hub) send(line []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.clients {
		select {
		case c <- line:
		default: // a client that lags loses events; the bench would then time out, loudly
		}
	}
}

func main() {
	port := flag.Int("port", 0, "port on 127.0.0.1")
	upstream := flag.String("upstream", "", "kube-apiserver URL")
	caFile := flag.String("ca", "", "kube-apiserver CA file")
	certFile := flag.String("cert", "", "client certificate file")
	keyFile := flag.String("key", "", "client key file")
	stored := flag.String("stored", "/apis/worker.gpustack.ai/v1alpha1/instancetypes", "the watched path")
	served := flag.String("served", "/apis/probe.gpustack.ai/v1", "the served group-version path")
	http2 := flag.Bool("http2", false, "offer HTTP/2 to the aggregator")
	flag.Parse()

	client := upstreamClient(*caFile, *certFile, *keyFile)
	h := &hub{clients: map[chan []byte]struct{}{}}
	go watchUpstream(client, *upstream+*stored, h)

	mux := http.NewServeMux()
	mux.HandleFunc(*served, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		group := strings.TrimPrefix(*served, "/apis/")
		fmt.Fprintf(w, `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":%q,"resources":[`+
			`{"name":"instancetypes","singularName":"instancetype","namespaced":false,"kind":"InstanceType",`+
			`"verbs":["get","list","watch"]}]}`, group)
	})
	mux.HandleFunc(*served+"/instancetypes", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") == "" {
			forward(client, *upstream+*stored+"?"+r.URL.RawQuery, w)
			return
		}
		c := h.add()
		defer h.remove(c)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		flusher := w.(http.Flusher)
		flusher.Flush()
		for {
			select {
			case line := <-c:
				if _, err := w.Write(line); err != nil {
					return
				}
				flusher.Flush()
			case <-r.Context().Done():
				return
			}
		}
	})
	srv := &http.Server{Addr: fmt.Sprintf("127.0.0.1:%d", *port), Handler: mux, TLSConfig: selfSigned()}
	if !*http2 {
		srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	}
	ln, err := net.Listen("tcp", srv.Addr)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("floor backend on %s (http2=%v)", srv.Addr, *http2)
	log.Fatal(srv.ServeTLS(ln, "", ""))
}

func upstreamClient(caFile, certFile, keyFile string) *http.Client {
	pool := x509.NewCertPool()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		log.Fatal(err)
	}
	pool.AppendCertsFromPEM(pem)
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		log.Fatal(err)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}}
	return &http.Client{Transport: tr}
}

func forward(client *http.Client, url string, w http.ResponseWriter) {
	resp, err := client.Get(url)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

func watchUpstream(client *http.Client, url string, h *hub) {
	for {
		resp, err := client.Get(url + "?watch=1&allowWatchBookmarks=true")
		if err != nil {
			log.Printf("upstream watch: %v", err)
			time.Sleep(time.Second)
			continue
		}
		reader := bufio.NewReaderSize(resp.Body, 1<<20)
		for {
			line, err := reader.ReadBytes('\n')
			if len(line) > 0 {
				h.send(line)
			}
			if err != nil {
				break
			}
		}
		resp.Body.Close()
	}
}

func selfSigned() *tls.Config {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		log.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "floor"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		log.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}
