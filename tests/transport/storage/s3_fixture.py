"""A real S3-compatible server for storage_tests: s3rver 3.7 (npm, installed by
scripts/install-deps.sh under ${XDG_CACHE_HOME:-~/.cache}/brigade/npm; $BRIGADE_S3RVER names
another s3rver executable) on 127.0.0.1 with its data in a temporary directory, a bucket
populated with boto3 (path-style, s3rver's built-in key S3RVER/S3RVER), and a
fault-injecting HTTP proxy in front of it. Nothing is downloaded here: without s3rver or
boto3 the fixture prints "missing=REASON" and exits, and the tests skip with that reason.

What s3rver checks of a signed request: the access key id (an unknown one is refused,
InvalidAccessKeyId), the Authorization header's form, x-amz-content-sha256 and the date
(within 15 minutes). What it does not: the SigV4 signature itself (a wrong secret is
accepted), and permissions (unsigned requests read everything, as from a public bucket).
So the proxy checks signatures instead: it recomputes each signed request's SigV4
signature with botocore's signer (Debian's python3-botocore, an implementation
independent of ours) from the method, path and query as decoded and canonically
re-encoded, the signed headers and the secret, and answers a mismatch 403
SignatureDoesNotMatch, as S3 does; "checked" lines count the requests it verified.

Usage: s3_fixture.py MIRROR_DIR [UPLOAD_DIR]. UPLOAD_DIR's files are put in the bucket
too, keyed by their paths relative to it (a process test's data set). Writes every object also under MIRROR_DIR (the bytes to
compare with), prints "name=value" lines and "ready", then reads commands from stdin, one
a line, answering "ok" when the fault is armed:
  fail N     the proxy's next N requests are answered 503 SlowDown
  stall N    the next N requests are read and never answered
  drop N     the next N answers are cut mid-body and the connection closed
  short N    the next N answers lose their last 10 bytes, Content-Length lowered to match
  redirect N the next N requests are answered 302 to the same path on the server itself
  latency MS every request from now on waits MS milliseconds before it is forwarded
  outage N   after N more requests are forwarded, s3rver is killed (SIGKILL); the proxy
             keeps accepting, and each request finds the server down (its connection is
             refused: the proxy closes the client's connection without an answer) until
             "outages" requests have, then s3rver is started again on the same port with
             the same data (the next request waits for it); D is the second word's count:
             "outage N D"
  down N     after N more requests, the proxy itself goes away: it stops listening and
             closes every connection (a whole host down: connections are refused)
  checked 0  answers "checked=N": how many signatures the proxy has verified so far
  requests 0 answers "requests=N bytes=M": requests the proxy has received so far, and
             body bytes it has sent back
End of input stops everything.

The same proxy also listens for HTTPS ("tls_proxy=https://127.0.0.1:PORT") with a
certificate for 127.0.0.1 made here by openssl ("ca_file=PATH": the certificate, which is
its own CA; absent, with no tls_proxy line, when openssl is not installed). Its requests
go through the same faults, counts and signature checks."""
import os
import random
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
from urllib.parse import quote, unquote, urlsplit

BUCKET = "brigade-data"
KEY_ID = SECRET = "S3RVER"  # s3rver's built-in account
faults = []  # pending fault names, oldest first
faults_lock = threading.Lock()
stop = threading.Event()
latency = [0.0]  # seconds added before each forwarded request
checked = [0]  # signatures the proxy verified
traffic = [0, 0]  # requests received, body bytes answered
outage = {"after": None, "down": 0, "left": 0}  # see "outage N D"
host = {"after": None, "down": False}  # see "down N"
backend_lock = threading.Condition()  # orders a kill and a restart of s3rver
forwarding = [0]  # requests being forwarded: a kill waits for them (none cut mid-answer)
botocore = {}  # AWSRequest, Credentials, S3SigV4Auth, once imported


def signature_error(request_line, headers):
    """None when the request is unsigned or its SigV4 signature is right, else the error
    code S3 answers: recomputed by botocore from the request as S3 canonicalizes it."""
    auth = next((v for k, v in headers if k.lower() == "authorization"), "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        return None
    fields = dict(part.strip().split("=", 1) for part in auth.split(" ", 1)[1].split(","))
    key_id, _, region, service, _ = fields["Credential"].split("/")
    if key_id != KEY_ID:
        return None  # s3rver itself refuses it: InvalidAccessKeyId
    values = {k.lower(): v for k, v in headers}
    signed = fields["SignedHeaders"].split(";")
    if "host" not in signed or any(h not in values for h in signed):
        return "SignatureDoesNotMatch"
    method, target, _ = request_line.split(" ")
    parts = urlsplit(target)
    params = [tuple(unquote(x) for x in pair.partition("=")[::2])
              for pair in parts.query.split("&") if pair]
    request = botocore["AWSRequest"](
        method=method, url=f"http://{values['host']}{quote(unquote(parts.path), safe='/~')}",
        headers={h: values[h] for h in signed}, params=params)
    request.context["timestamp"] = values["x-amz-date"]
    signer = botocore["S3SigV4Auth"](botocore["Credentials"](KEY_ID, SECRET), service, region)
    expected = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)),
                                request)
    with faults_lock:
        checked[0] += 1
    return None if expected == fields["Signature"] else "SignatureDoesNotMatch"


def next_fault():
    with faults_lock:
        return faults.pop(0) if faults else None


def read_request(conn):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = [tuple(x.strip() for x in line.split(":", 1)) for line in lines[1:]]
    length = next((int(v) for k, v in headers if k.lower() == "content-length"), 0)
    while len(body) < length:
        body += conn.recv(65536)
    return lines[0], headers, body


def forward(backend, request_line, headers, body):
    """The backend's answer: status line, headers (no length or framing), body, and the
    Content-Length it announced (a HEAD's is the object's size)."""
    method = request_line.split(" ", 1)[0]
    with socket.create_connection(backend) as upstream:
        lines = [request_line] + [f"{k}: {v}" for k, v in headers if k.lower() != "connection"]
        lines.append("Connection: close")
        upstream.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        data = b""
        while chunk := upstream.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/"):
        raise ConnectionResetError("the server closed the connection without an answer")
    status, *rest = head.decode("latin-1").split("\r\n")
    headers = [tuple(x.strip() for x in line.split(":", 1)) for line in rest]
    length = next((int(v) for k, v in headers if k.lower() == "content-length"), len(body))
    headers = [(k, v) for k, v in headers
               if k.lower() not in ("content-length", "connection", "transfer-encoding")]
    return status, headers, (b"" if method == "HEAD" else body), length


def send(conn, status, headers, body, length):
    lines = [status] + [f"{k}: {v}" for k, v in headers] + [f"Content-Length: {length}"]
    conn.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)


def serve_client(conn, backend, listener):
    with conn:
        while not stop.is_set():
            request = read_request(conn)
            if request is None:
                return
            with faults_lock:
                traffic[0] += 1
                if host["after"] == 0:  # the whole host goes away: refused from now on
                    host["after"], host["down"] = None, True
                    listener.close()
                elif host["after"] is not None:
                    host["after"] -= 1
                if host["down"]:
                    return
            fault = next_fault()
            if fault == "stall":
                stop.wait()  # never answered; the client gives up
                return
            if fault == "fail":
                body = b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>"
                send(conn, "HTTP/1.1 503 Service Unavailable", [("Content-Type", "application/xml")],
                     body, len(body))
                continue
            if fault == "redirect":
                target = f"http://127.0.0.1:{backend.port}{request[0].split(' ')[1]}"
                send(conn, "HTTP/1.1 302 Found", [("Location", target)], b"", 0)
                continue
            code = signature_error(*request[:2])
            if code:
                body = (f"<Error><Code>{code}</Code><Message>The request signature we calculated "
                        "does not match the signature you provided.</Message></Error>").encode()
                send(conn, "HTTP/1.1 403 Forbidden", [("Content-Type", "application/xml")],
                     body, len(body))
                continue
            if latency[0]:
                stop.wait(latency[0])
            with backend_lock:
                if outage["after"] == 0:  # killed before this request, once the others are answered
                    backend_lock.wait_for(lambda: forwarding[0] == 0)
                    outage["after"], outage["left"] = None, outage["down"]
                    backend.kill()
                elif outage["after"] is not None:
                    outage["after"] -= 1
                down = outage["left"] > 0
                if down:
                    outage["left"] -= 1
                else:
                    if not backend.running():
                        backend.start()  # this request waits for it
                    forwarding[0] += 1
            if down:
                try:  # the server is really gone: its port refuses connections
                    socket.create_connection(backend.address()).close()
                except OSError:
                    pass
                return  # the client's connection closed without an answer
            try:
                status, headers, body, length = forward(backend.address(), *request)
            except OSError:  # the server went away while it answered: no answer
                return
            finally:
                with backend_lock:
                    forwarding[0] -= 1
                    backend_lock.notify_all()
            if fault == "drop":  # the whole length announced, half the body sent, closed
                send(conn, status, headers, body[: len(body) // 2], length)
                return
            if fault == "short":  # a consistent but short answer: Content-Range unchanged
                body = body[:-10]
                length = len(body)
            with faults_lock:
                traffic[1] += len(body)
            send(conn, status, headers, body, length)


def proxy(listener, backend, tls=None):
    while not stop.is_set():
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=serve_tls if tls else serve_client,
                         args=(conn, backend, listener) + ((tls,) if tls else ()),
                         daemon=True).start()


def serve_tls(conn, backend, listener, tls):
    try:  # a client that refuses the certificate ends the handshake: nothing to serve
        conn = tls.wrap_socket(conn, server_side=True)
    except (ssl.SSLError, OSError):
        conn.close()
        return
    serve_client(conn, backend, listener)


def tls_context(folder):
    """A server context with a new self-signed certificate for 127.0.0.1 (its own CA),
    and the certificate's path; (None, None) without openssl."""
    cert, key = os.path.join(folder, "ca.pem"), os.path.join(folder, "key.pem")
    try:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                        "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                        "-addext", "basicConstraints=critical,CA:TRUE",
                        "-keyout", key, "-out", cert], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        return None, None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context, cert


class Backend:
    """s3rver as a child process: started, killed, and started again on the same port
    with the same data (an "outage")."""

    def __init__(self, s3rver, data, env):
        self.s3rver, self.data, self.env = s3rver, data, env
        self.process = None
        self.port = 0  # 0 until the first start: s3rver picks one

    def start(self):
        """Starts s3rver and waits until it listens; False when it exited first."""
        self.process = subprocess.Popen(
            [self.s3rver, "-d", self.data, "-a", "127.0.0.1", "-p", str(self.port), "-s",
             "--configure-bucket", BUCKET], env=self.env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, text=True)
        for line in self.process.stdout:  # "S3rver listening on 127.0.0.1:PORT" once it listens
            if line.startswith("S3rver listening on "):
                self.port = int(line.rsplit(":", 1)[1])
                threading.Thread(target=self.process.stdout.read, daemon=True).start()
                return True
        return False

    def running(self):
        return self.process is not None and self.process.poll() is None

    def address(self):
        return ("127.0.0.1", self.port)

    def kill(self):
        self.process.kill()
        self.process.wait()

    def stop(self):
        if self.running():
            self.process.terminate()
            self.process.wait()


def find_s3rver():
    if os.environ.get("BRIGADE_S3RVER"):
        return os.environ["BRIGADE_S3RVER"]
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "brigade", "npm", "node_modules", ".bin", "s3rver")


def missing(reason):
    print(f"missing={reason}", flush=True)
    sys.exit(0)


def main():
    mirror = sys.argv[1]
    s3rver = find_s3rver()
    if not os.access(s3rver, os.X_OK):
        missing(f"no s3rver at {s3rver} (scripts/install-deps.sh installs s3rver@3.7.1 with npm)")
    try:
        import boto3
        from botocore.auth import S3SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.config import Config
        from botocore.credentials import Credentials
        botocore.update(AWSRequest=AWSRequest, Credentials=Credentials, S3SigV4Auth=S3SigV4Auth)
    except ImportError:
        missing(f"no boto3 for {sys.executable} (Debian's python3-boto3: scripts/install-deps.sh)")
    data = tempfile.mkdtemp(prefix="brigade-s3rver-")
    tls_folder = tempfile.mkdtemp(prefix="brigade-s3-tls-")
    # s3rver 3.7 makes ListObjectsV2 continuation tokens with DES, which OpenSSL 3 keeps in
    # its legacy provider: without it every truncated listing is a 500 InternalError.
    env = dict(os.environ)
    env["NODE_OPTIONS"] = (env.get("NODE_OPTIONS", "") + " --openssl-legacy-provider").strip()
    backend = Backend(s3rver, data, env)
    try:
        if not backend.start():
            missing(f"s3rver exited ({backend.process.wait()}) before it listened")
        serve(mirror, backend, boto3, Config, sys.argv[2] if len(sys.argv) > 2 else None, tls_folder)
    finally:
        with backend_lock:
            backend.stop()
        shutil.rmtree(data, ignore_errors=True)
        shutil.rmtree(tls_folder, ignore_errors=True)


def serve(mirror, backend, boto3, Config, upload, tls_folder):
    endpoint = f"http://127.0.0.1:{backend.port}"
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                      aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET,
                      config=Config(s3={"addressing_style": "path"}))
    rng = random.Random(25)
    objects = {f"train/class_{c}/{i:03d}.bin": rng.randbytes(rng.randrange(1, 3000))
               for c in "ab" for i in range(13)}
    objects["big.bin"] = rng.randbytes(3 << 20)
    for name in ["odd/a b+c=d&e.bin", "odd/\u00e9t\u00e9 2013/(1)~x_y-z.bin", "odd/%41.bin"]:
        objects[name] = rng.randbytes(100)
    objects["manifest.jsonl"] = b"{\"path\": \"train/class_a/000.bin\"}\n"
    for name, data in objects.items():
        s3.put_object(Bucket=BUCKET, Key=name, Body=data)
        path = os.path.join(mirror, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)

    for folder, _, names in os.walk(upload) if upload else []:
        for name in names:
            path = os.path.join(folder, name)
            with open(path, "rb") as f:
                s3.put_object(Bucket=BUCKET, Key=os.path.relpath(path, upload), Body=f.read())

    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    threading.Thread(target=proxy, args=(listener, backend), daemon=True).start()
    tls, ca_file = tls_context(tls_folder)
    if tls:
        tls_listener = socket.socket()
        tls_listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        tls_listener.bind(("127.0.0.1", 0))
        tls_listener.listen(64)
        threading.Thread(target=proxy, args=(tls_listener, backend, tls), daemon=True).start()
        print(f"tls_proxy=https://127.0.0.1:{tls_listener.getsockname()[1]}")
        print(f"ca_file={ca_file}")

    print(f"endpoint={endpoint}")
    print(f"proxy=http://127.0.0.1:{listener.getsockname()[1]}")
    print(f"bucket={BUCKET}")
    print(f"key_id={KEY_ID}")
    print(f"secret={SECRET}")
    print("ready", flush=True)
    for line in sys.stdin:
        name, count, *rest = line.split()
        with faults_lock:
            if name == "checked":
                print(f"checked={checked[0]}", flush=True)
            elif name == "requests":
                print(f"requests={traffic[0]} bytes={traffic[1]}", flush=True)
            elif name == "latency":
                latency[0] = int(count) / 1000
            elif name == "outage":
                with backend_lock:
                    outage["after"], outage["down"] = int(count), int(rest[0]) if rest else 1
            elif name == "down":
                host["after"] = int(count)
            else:
                faults.extend([name] * int(count))
        print("ok", flush=True)
    stop.set()
    listener.close()


if __name__ == "__main__":
    main()
