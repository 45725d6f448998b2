// SPDX-License-Identifier: MIT
/*
 * A deterministic TLS workload for Debian's sslsnoop.bt and ssllatency.bt under
 * `uprobe run` and bpftrace (tests/run.cmake): a client and a server in one thread,
 * joined by a BIO pair, so that the calls into libssl are the same each run whatever
 * the scheduler does.  The handshake is driven by SSL_do_handshake on both ends in
 * turn; then the client writes "ping" and the server reads it and answers "pong" three
 * times; a read with nothing to read fails (-1).  Prints nothing; exit 0 when every
 * step went as planned.
 *
 *   run_ssl CERT.pem KEY.pem
 */
#include <openssl/bio.h>
#include <openssl/ssl.h>
#include <string.h>

int main(int argc, char **argv)
{
	SSL_CTX *sctx, *cctx;
	SSL *s, *c;
	BIO *bs, *bc;
	char buf[64];
	int ok = 0, done_c = 0, done_s = 0;

	if (argc < 3)
		return 2;
	sctx = SSL_CTX_new(TLS_server_method());
	cctx = SSL_CTX_new(TLS_client_method());
	if (!sctx || !cctx || SSL_CTX_use_certificate_file(sctx, argv[1], SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_use_PrivateKey_file(sctx, argv[2], SSL_FILETYPE_PEM) != 1)
		return 3;
	s = SSL_new(sctx);
	c = SSL_new(cctx);
	if (!s || !c || !BIO_new_bio_pair(&bs, 0, &bc, 0))
		return 4;
	SSL_set_bio(s, bs, bs);
	SSL_set_bio(c, bc, bc);
	SSL_set_accept_state(s);
	SSL_set_connect_state(c);
	for (int i = 0; i < 16 && !(done_c && done_s); i++) {
		if (!done_c)
			done_c = SSL_do_handshake(c) == 1;
		if (!done_s)
			done_s = SSL_do_handshake(s) == 1;
	}
	if (!done_c || !done_s)
		return 5;
	for (int i = 0; i < 3; i++) {
		if (SSL_write(c, "ping", 4) == 4 && SSL_read(s, buf, sizeof(buf)) == 4 &&
		    SSL_write(s, "pong", 4) == 4 && SSL_read(c, buf, sizeof(buf)) == 4 &&
		    !memcmp(buf, "pong", 4))
			ok++;
	}
	if (SSL_read(s, buf, sizeof(buf)) != -1) /* nothing sent: it would block */
		return 6;
	SSL_free(c);
	SSL_free(s);
	SSL_CTX_free(cctx);
	SSL_CTX_free(sctx);
	return ok == 3 ? 0 : 7;
}
