// A deployment's identity provider on loopback for tests/e2e/test_oidc_provider.py: panva's
// oidc-provider (a certified OpenID Provider), one confidential client allowed the
// client-credentials grant, and the MCP gateway as its one resource server, whose access
// tokens are RS256 JWTs (RFC 9068) signed with a key made for this run.
//   node provider.mjs ISSUER PORT AUDIENCE CLIENT_ID CLIENT_SECRET "SCOPE ..."
// Prints "ready" once it listens.
import http from 'node:http';
import { exportJWK, generateKeyPair } from 'jose';
import Provider, { errors } from 'oidc-provider';

const [issuer, port, audience, clientId, clientSecret, scopes] = process.argv.slice(2);
const { privateKey } = await generateKeyPair('RS256', { extractable: true });
const key = { ...(await exportJWK(privateKey)), kid: 'run-key', alg: 'RS256', use: 'sig' };

const provider = new Provider(issuer, {
  jwks: { keys: [key] },
  clients: [{
    client_id: clientId,
    client_secret: clientSecret,
    grant_types: ['client_credentials'],
    redirect_uris: [],
    response_types: [],
  }],
  scopes: scopes.split(' '),
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => audience,
      getResourceServerInfo: (ctx, resource) => {
        if (resource !== audience) throw new errors.InvalidTarget();
        return {
          scope: scopes, audience, accessTokenTTL: 600,
          accessTokenFormat: 'jwt', jwt: { sign: { alg: 'RS256' } },
        };
      },
    },
  },
});

http.createServer(provider.callback()).listen(Number(port), '127.0.0.1', () => {
  console.log('ready');
});
