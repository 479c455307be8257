// An RFC 4998 evidence record checked by BouncyCastle's org.bouncycastle.tsp.ers (an implementation we did not
// write) against a trust anchor the caller holds: the record parses (ERSEvidenceRecord), the data object is
// present at the given time (validatePresent over ERSByteData: its hash in the first partial hash tree, the
// reduced hash tree leading to the time-stamp's imprint), the TSA certificate of the newest time-stamp chains to
// ROOT.pem (PKIX path building at that time-stamp's genTime, with the certificates of CHAIN.pem and the token as
// candidates, revocation not checked), and only then the token is validated with a verifier built from that
// certificate (TimeStampToken.validate: signature, ESS signing-certificate naming it, EKU timeStamping,
// validity at genTime). The certificate a token carries is never trusted by itself: anyone can make one.
//
//   java -cp bcprov.jar:bcpkix.jar:bcutil.jar ErsChecker.java --root ROOT.pem [--chain CHAIN.pem] \
//     RECORD.ers DATA-OBJECT... [ISO-8601 time]
//
// Several data objects are checked as one data group (ERSDataGroup, RFC 4998 4.2).
//
// Prints "valid" and exits 0, or "invalid: <reason>" and exits 1; a missing --root is a usage error (exit 2).
import java.io.FileInputStream;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.Security;
import java.security.cert.CertPathBuilder;
import java.security.cert.CertStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.cert.CollectionCertStoreParameters;
import java.security.cert.PKIXBuilderParameters;
import java.security.cert.TrustAnchor;
import java.security.cert.X509CertSelector;
import java.security.cert.X509Certificate;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Date;
import java.util.List;
import java.util.Set;
import org.bouncycastle.asn1.tsp.ArchiveTimeStamp;
import org.bouncycastle.asn1.tsp.ArchiveTimeStampChain;
import org.bouncycastle.asn1.tsp.EvidenceRecord;
import org.bouncycastle.cert.X509CertificateHolder;
import org.bouncycastle.cert.jcajce.JcaX509CertificateConverter;
import org.bouncycastle.cms.jcajce.JcaSimpleSignerInfoVerifierBuilder;
import org.bouncycastle.jce.provider.BouncyCastleProvider;
import org.bouncycastle.operator.DigestCalculatorProvider;
import org.bouncycastle.operator.jcajce.JcaDigestCalculatorProviderBuilder;
import org.bouncycastle.tsp.ers.ERSArchiveTimeStamp;
import org.bouncycastle.tsp.ers.ERSByteData;
import org.bouncycastle.tsp.ers.ERSData;
import org.bouncycastle.tsp.ers.ERSDataGroup;
import org.bouncycastle.tsp.ers.ERSEvidenceRecord;

public class ErsChecker {
    static Collection<? extends Certificate> certificates(String file) throws Exception {
        try (InputStream in = new FileInputStream(file)) {
            return CertificateFactory.getInstance("X.509").generateCertificates(in);
        }
    }

    // the TSA certificate chains to the root at `at`, else CertPathBuilderException
    static void chainToRoot(X509Certificate tsa, X509Certificate root, List<Certificate> pool, Date at)
            throws Exception {
        X509CertSelector target = new X509CertSelector();
        target.setCertificate(tsa);
        PKIXBuilderParameters params = new PKIXBuilderParameters(Set.of(new TrustAnchor(root, null)), target);
        params.setRevocationEnabled(false);
        params.setDate(at);
        List<Certificate> candidates = new ArrayList<>(pool);
        candidates.add(tsa);
        params.addCertStore(CertStore.getInstance("Collection", new CollectionCertStoreParameters(candidates)));
        CertPathBuilder.getInstance("PKIX").build(params);
    }

    public static void main(String[] args) throws Exception {
        Security.addProvider(new BouncyCastleProvider());
        String rootFile = null;
        String chainFile = null;
        List<String> rest = new ArrayList<>();
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("--root")) rootFile = args[++i];
            else if (args[i].equals("--chain")) chainFile = args[++i];
            else rest.add(args[i]);
        }
        if (rootFile == null || rest.size() < 2) {
            System.err.println("usage: ErsChecker.java --root ROOT.pem [--chain CHAIN.pem] RECORD.ers DATA... [time]");
            System.exit(2);
        }
        X509Certificate root = (X509Certificate) certificates(rootFile).iterator().next();
        List<Certificate> pool = new ArrayList<>(chainFile == null ? List.of() : certificates(chainFile));
        byte[] record = Files.readAllBytes(Path.of(rest.get(0)));
        boolean timed = rest.size() > 2 && rest.get(rest.size() - 1).matches("\\d{4}-\\d{2}-\\d{2}T.*");
        Date at = timed ? Date.from(Instant.parse(rest.get(rest.size() - 1))) : new Date();
        List<ERSData> objects = new ArrayList<>();
        for (int i = 1; i < rest.size() - (timed ? 1 : 0); i++)
            objects.add(new ERSByteData(Files.readAllBytes(Path.of(rest.get(i)))));
        ERSData data = objects.size() == 1 ? objects.get(0) : new ERSDataGroup(objects);
        try {
            DigestCalculatorProvider digests = new JcaDigestCalculatorProviderBuilder().setProvider("BC").build();
            ERSEvidenceRecord evidence = new ERSEvidenceRecord(record, digests);
            evidence.validatePresent(data, at);
            // the newest time-stamp, the one validate() checks with the verifier (RFC 4998 5.2: it covers the others)
            ArchiveTimeStampChain[] chains =
                EvidenceRecord.getInstance(record).getArchiveTimeStampSequence().getArchiveTimeStampChains();
            ArchiveTimeStamp[] stamps = chains[chains.length - 1].getArchiveTimestamps();
            ERSArchiveTimeStamp newest = new ERSArchiveTimeStamp(stamps[stamps.length - 1], digests);
            X509CertificateHolder holder = newest.getSigningCertificate();
            if (holder == null) throw new IllegalStateException("the time-stamp carries no TSA certificate");
            X509Certificate tsa = new JcaX509CertificateConverter().setProvider("BC").getCertificate(holder);
            try {
                chainToRoot(tsa, root, pool, newest.getGenTime());
            } catch (Exception e) {
                throw new IllegalStateException("the TSA certificate does not chain to the root: " + e.getMessage(), e);
            }
            evidence.validate(new JcaSimpleSignerInfoVerifierBuilder().setProvider("BC").build(tsa));
            System.out.println("valid");
        } catch (Exception e) {
            System.out.println("invalid: " + e);
            System.exit(1);
        }
    }
}
