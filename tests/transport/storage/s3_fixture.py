"""A real S3-compatible server for storage_tests: moto's server on 127.0.0.1 with IAM
authentication on (it verifies SigV4 signatures: a wrong secret is refused with
SignatureDoesNotMatch), one user allowed s3:*, a bucket populated with boto3, and a
fault-injecting HTTP proxy in front of it.

Usage: s3_fixture.py MIRROR_DIR [--open]. --open: authentication off (any or no
signature accepted), and keys that need URI encoding added (moto 5.2 checks signatures
against the path and query as it decoded them, so such keys fail its check, boto3's
requests as well as ours). Writes every object also under MIRROR_DIR (the bytes to
compare with), prints "name=value" lines and "ready", then reads commands from stdin, one
a line, answering "ok" when the fault is armed:
  fail N     the proxy's next N requests are answered 503 SlowDown
  stall N    the next N requests are read and never answered
  drop N     the next N answers are cut mid-body and the connection closed
  short N    the next N answers lose their last 10 bytes, Content-Length lowered to match
  redirect N the next N requests are answered 302 to the same path on the server itself
  latency MS every request from now on waits MS milliseconds before it is forwarded
End of input stops everything."""
import json
import os
import random
import socket
import sys
import threading

OPEN = "--open" in sys.argv
if not OPEN:
    os.environ["INITIAL_NO_AUTH_ACTION_COUNT"] = "3"  # create_user, put_user_policy, create_access_key
from moto.server import ThreadedMotoServer  # noqa: E402
import boto3  # noqa: E402

BUCKET = "brigade-data"
faults = []  # pending fault names, oldest first
faults_lock = threading.Lock()
stop = threading.Event()
latency = [0.0]  # seconds added before each forwarded request


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
    status, *rest = head.decode("latin-1").split("\r\n")
    headers = [tuple(x.strip() for x in line.split(":", 1)) for line in rest]
    length = next((int(v) for k, v in headers if k.lower() == "content-length"), len(body))
    headers = [(k, v) for k, v in headers
               if k.lower() not in ("content-length", "connection", "transfer-encoding")]
    return status, headers, (b"" if method == "HEAD" else body), length


def send(conn, status, headers, body, length):
    lines = [status] + [f"{k}: {v}" for k, v in headers] + [f"Content-Length: {length}"]
    conn.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)


def serve_client(conn, backend):
    with conn:
        while not stop.is_set():
            request = read_request(conn)
            if request is None:
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
                target = f"http://{backend[0]}:{backend[1]}{request[0].split(' ')[1]}"
                send(conn, "HTTP/1.1 302 Found", [("Location", target)], b"", 0)
                continue
            if latency[0]:
                stop.wait(latency[0])
            status, headers, body, length = forward(backend, *request)
            if fault == "drop":  # the whole length announced, half the body sent, closed
                send(conn, status, headers, body[: len(body) // 2], length)
                return
            if fault == "short":  # a consistent but short answer: Content-Range unchanged
                body = body[:-10]
                length = len(body)
            send(conn, status, headers, body, length)


def proxy(listener, backend):
    while not stop.is_set():
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=serve_client, args=(conn, backend), daemon=True).start()


def main():
    mirror = sys.argv[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://127.0.0.1:{port}"
    plain = dict(endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="setup",
                 aws_secret_access_key="setup")
    if OPEN:
        key = {"AccessKeyId": "open", "SecretAccessKey": "open"}
    else:
        iam = boto3.client("iam", **plain)
        iam.create_user(UserName="brigade")
        iam.put_user_policy(UserName="brigade", PolicyName="s3", PolicyDocument=json.dumps({
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
        key = iam.create_access_key(UserName="brigade")["AccessKey"]
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                      aws_access_key_id=key["AccessKeyId"], aws_secret_access_key=key["SecretAccessKey"])
    s3.create_bucket(Bucket=BUCKET)
    rng = random.Random(25)
    objects = {f"train/class_{c}/{i:03d}.bin": rng.randbytes(rng.randrange(1, 3000))
               for c in "ab" for i in range(13)}
    objects["big.bin"] = rng.randbytes(3 << 20)
    if OPEN:
        for name in ["odd/a b+c=d&e.bin", "odd/\u00e9t\u00e9 2013/(1)~x_y-z.bin", "odd/%41.bin"]:
            objects[name] = rng.randbytes(100)
    objects["manifest.jsonl"] = b"{\"path\": \"train/class_a/000.bin\"}\n"
    for name, data in objects.items():
        extra = {"ACL": "public-read"} if OPEN else {}  # anonymous reads (a public bucket)
        s3.put_object(Bucket=BUCKET, Key=name, Body=data, **extra)
        path = os.path.join(mirror, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)

    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    threading.Thread(target=proxy, args=(listener, ("127.0.0.1", port)), daemon=True).start()

    print(f"endpoint={endpoint}")
    print(f"proxy=http://127.0.0.1:{listener.getsockname()[1]}")
    print(f"bucket={BUCKET}")
    print(f"key_id={key['AccessKeyId']}")
    print(f"secret={key['SecretAccessKey']}")
    print("ready", flush=True)
    for line in sys.stdin:
        name, count = line.split()
        with faults_lock:
            if name == "latency":
                latency[0] = int(count) / 1000
            else:
                faults.extend([name] * int(count))
        print("ok", flush=True)
    stop.set()
    listener.close()
    server.stop()


if __name__ == "__main__":
    main()
