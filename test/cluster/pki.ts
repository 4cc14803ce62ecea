// Generates the control plane's certificates with the openssl CLI: a CA, the API server's serving
// certificate, client certificates per component, and the service-account signing key.
import { execFile } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';

const exec = promisify(execFile);

export interface Identity {
  /** File stem: <name>.crt and <name>.key. */
  name: string;
  commonName: string;
  organization?: string;
}

export interface Pki {
  dir: string;
  caCert: string;
  serverCert: string;
  serverKey: string;
  serviceAccountKey: string;
  serviceAccountPub: string;
  client(name: string): { cert: string; key: string };
}

export const clusterDomainNames = [
  'localhost',
  'kubernetes',
  'kubernetes.default',
  'kubernetes.default.svc',
  'kubernetes.default.svc.cluster.local',
];

async function openssl(args: string[], cwd: string): Promise<void> {
  try {
    await exec('openssl', args, { cwd });
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`openssl ${args[0]} failed: ${e.stderr?.trim() || e.message}`);
  }
}

// P-256 keys: fast to generate, accepted by every component (including as the service-account signer).
const newKey = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

async function signLeaf(dir: string, name: string, subject: string, extensions: string): Promise<void> {
  await writeFile(path.join(dir, `${name}.ext`), extensions);
  await openssl(
    ['req', '-new', ...newKey, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', subject],
    dir,
  );
  await openssl(
    [
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      'ca.crt',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-days',
      '30',
      '-out',
      `${name}.crt`,
      '-extfile',
      `${name}.ext`,
    ],
    dir,
  );
}

export async function generatePki(dir: string, clients: readonly Identity[]): Promise<Pki> {
  await openssl(
    [
      'req',
      '-x509',
      ...newKey,
      '-keyout',
      'ca.key',
      '-out',
      'ca.crt',
      '-days',
      '30',
      '-subj',
      '/CN=gitops-reloader-test-ca',
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign,digitalSignature',
    ],
    dir,
  );
  const san = [...clusterDomainNames.map((d) => `DNS:${d}`), 'IP:127.0.0.1', 'IP:10.96.0.1'].join(',');
  await signLeaf(
    dir,
    'apiserver',
    '/CN=kube-apiserver',
    `basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=${san}\n`,
  );
  for (const c of clients) {
    const subject = `/CN=${c.commonName}${c.organization ? `/O=${c.organization}` : ''}`;
    await signLeaf(
      dir,
      c.name,
      subject,
      'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n',
    );
  }
  await openssl(['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', 'sa.key'], dir);
  await openssl(['ec', '-in', 'sa.key', '-pubout', '-out', 'sa.pub'], dir);
  const p = (f: string) => path.join(dir, f);
  return {
    dir,
    caCert: p('ca.crt'),
    serverCert: p('apiserver.crt'),
    serverKey: p('apiserver.key'),
    serviceAccountKey: p('sa.key'),
    serviceAccountPub: p('sa.pub'),
    client: (name) => ({ cert: p(`${name}.crt`), key: p(`${name}.key`) }),
  };
}

export async function readPem(file: string): Promise<string> {
  return readFile(file, 'utf8');
}
